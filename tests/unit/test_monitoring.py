"""The chart's alerts and Grafana dashboard, against promtool and the code's metrics.

The PrometheusRule is rendered by helm and its groups checked and unit-tested
by promtool (``alerts.test.yaml``: each alert fires when it should and only
then). Every ``helmr_*`` name the alerts and the dashboard mention must be one
the control plane exposes, so renaming a metric breaks this test, not a
platform team's dashboard.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.registry import Collector

from helmr.operator.leadership.leader import Leadership
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.server.metrics import Metrics
from helmr.store import Store
from tests.unit.helm import find_promtool
from tests.unit.test_chart import CHART, NAMESPACE, RELEASE, of_kind, one, render

DASHBOARD = CHART / "dashboards" / "helmr.json"
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
ALERT_TESTS = Path(__file__).parent / "alerts.test.yaml"
METRIC_NAME = re.compile(r"\bhelmr_[a-z0-9_]+")
# The samples a metric family of each type exposes (prometheus_client's names).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}

pytestmark = pytest.mark.helm

ENABLED = {"metrics.prometheusRule.enabled": "true", "metrics.dashboard.enabled": "true"}


def _rule(values: dict[str, str] | None = None) -> dict[str, Any]:
    return one(render({**ENABLED, **(values or {})}), "PrometheusRule")


def _dashboard_map(values: dict[str, str] | None = None) -> dict[str, Any]:
    maps = of_kind(render({**ENABLED, **(values or {})}), "ConfigMap")
    dashboards = [m for m in maps if m["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert len(dashboards) == 1
    return dashboards[0]


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    promtool = find_promtool()
    assert promtool is not None, "the promtool marker skips these tests without promtool"
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, check=False, cwd=cwd, timeout=60
    )


def test_alerts_and_dashboard_are_off_by_default() -> None:
    manifests = render()
    assert not of_kind(manifests, "PrometheusRule")
    assert not [
        m
        for m in of_kind(manifests, "ConfigMap")
        if m["metadata"]["labels"].get("grafana_dashboard")
    ]


def test_the_dashboard_ships_as_a_labelled_config_map() -> None:
    shipped = _dashboard_map(
        {
            "metrics.dashboard.namespace": "monitoring",
            "metrics.dashboard.labels.team": "platform",
            "metrics.dashboard.annotations.grafana_folder": "Helmr",
        }
    )
    assert shipped["metadata"]["namespace"] == "monitoring"
    assert shipped["metadata"]["labels"]["team"] == "platform"
    assert shipped["metadata"]["annotations"] == {"grafana_folder": "Helmr"}
    assert json.loads(shipped["data"]["helmr.json"]) == json.loads(DASHBOARD.read_text())


def test_the_rule_selects_the_release_and_takes_its_thresholds() -> None:
    rule = _rule(
        {
            "metrics.prometheusRule.labels.release": "prom",
            "metrics.prometheusRule.selector": 'job="helmr-api"',
            "metrics.prometheusRule.dispatchP99Seconds": "3",
            "metrics.prometheusRule.recoveryPointLagSeconds": "120",
        }
    )
    assert rule["metadata"]["labels"]["release"] == "prom"
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert set(rules) == {
        "HelmrNoLeader",
        "HelmrSessionsHeld",
        "HelmrProcessFailureRate",
        "HelmrDispatchSlow",
        "HelmrSavesFailing",
        "HelmrRecoveryPointLagging",
    }
    assert all('job="helmr-api"' in r["expr"] for r in rules.values())
    assert not any(NAMESPACE in r["expr"] for r in rules.values())
    assert rules["HelmrDispatchSlow"]["expr"].endswith("> 3")
    assert rules["HelmrRecoveryPointLagging"]["expr"].endswith("> 120")


@pytest.mark.promtool
def test_the_rules_pass_promtool_check_and_their_unit_tests(tmp_path: Path) -> None:
    # promtool reads rule files, not PrometheusRule objects: their groups are one.
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rule()["spec"]))
    shutil.copy(ALERT_TESTS, tmp_path / "alerts.test.yaml")
    checked = _promtool("check", "rules", "--lint=all", "--lint-fatal", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _promtool("test", "rules", "alerts.test.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert (RELEASE, NAMESPACE) == ("helmr", "helmr-system"), "alerts.test.yaml expects these"


def _exposed(collectors: Iterable[Collector]) -> set[str]:
    """Every family and sample name the collectors can expose, samples or not yet."""
    registry = Metrics(tuple(collectors)).registry
    return {
        family.name + suffix
        for family in registry.collect()
        for suffix in ("", *_SUFFIXES[family.type])
    }


def _queries(value: object) -> Iterable[str]:
    """Every string in a dashboard or rule: expressions, legends, descriptions."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _queries(item)
    elif isinstance(value, list):
        for item in value:
            yield from _queries(item)


async def test_every_metric_the_alerts_and_dashboard_name_is_exposed(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "helmr.db") as store:
        # What the control plane registers (helmr.operator.control_plane): the
        # operator's metrics, the leadership gauge and the API's own.
        leadership = Leadership(store, None, on_deposed=lambda: None)
        exposed = _exposed([*OperatorMetrics().collectors, leadership.gauge])
    assert "helmr_api_requests_total" in exposed  # the API's own, beside those
    named = {
        name
        for source in (_rule()["spec"], json.loads(DASHBOARD.read_text()))
        for text in _queries(source)
        for name in METRIC_NAME.findall(text)
    }
    assert len(named) >= 15, named
    assert named - exposed == set()


def test_the_operations_doc_lists_every_panel_with_its_queries() -> None:
    doc = OPERATIONS.read_text()
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        assert panel["title"] in doc
        for target in panel.get("targets", []):
            # Inside a Markdown table a query's | is written \|.
            assert target["expr"].replace("|", "\\|") in doc, target["expr"]
