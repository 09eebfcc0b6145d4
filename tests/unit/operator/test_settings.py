"""The operator's settings come from HELMR_* variables, the ones the chart sets."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from helmr.operator.settings import Settings

DEPLOYMENT = Path(__file__).parents[3] / "charts" / "helmr" / "templates" / "deployment.yaml"
# Set by the chart for the CLI and tools run in the pod, not read by the operator.
NOT_SETTINGS = {"HELMR_NAMESPACE"}


def _variables() -> set[str]:
    """Every variable Settings reads."""
    prefix = Settings.model_config.get("env_prefix", "")
    return {
        (field.validation_alias if isinstance(field.validation_alias, str) else prefix + name)
        for name, field in Settings.model_fields.items()
    }


def test_every_variable_the_chart_sets_is_a_setting() -> None:
    chart = set(re.findall(r"- name: (HELMR_\w+)", DEPLOYMENT.read_text()))
    assert chart, "no HELMR_ variables found in the chart"
    assert chart - NOT_SETTINGS <= {v.upper() for v in _variables()}


def test_defaults_suit_a_local_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in _variables():
        monkeypatch.delenv(variable.upper(), raising=False)
    settings = Settings()
    assert settings.api_port == settings.runner_port == 8080
    assert settings.runner_url == "http://helmr.helmr-system.svc:8080"
    assert settings.watch_namespaces == ()
    assert settings.history_retention == timedelta(days=30)
    assert settings.stop_grace == timedelta(seconds=10)


def test_values_are_parsed_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELMR_API_PORT", "9000")
    monkeypatch.setenv("HELMR_WATCH_NAMESPACES", "team-a,,team-b")
    monkeypatch.setenv("HELMR_HISTORY_RETENTION_SECONDS", "86400")
    monkeypatch.setenv("HELMR_STOP_GRACE_SECONDS", "2.5")
    monkeypatch.setenv("HELMR_MAX_EXECUTION_LOSSES", "5")
    monkeypatch.delenv("HELMR_RUNNER_PORT", raising=False)
    monkeypatch.delenv("HELMR_RUNNER_URL", raising=False)
    settings = Settings()
    # The runner port follows the API port, and the runner URL the runner port.
    assert settings.runner_port == 9000
    assert settings.runner_url == "http://helmr.helmr-system.svc:9000"
    assert settings.watch_namespaces == ("team-a", "team-b")
    assert settings.history_retention == timedelta(days=1)
    assert settings.stop_grace == timedelta(seconds=2.5)
    assert settings.max_execution_losses == 5


def test_a_malformed_value_names_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELMR_API_PORT", "eighty")
    with pytest.raises(ValueError, match="api_port"):
        Settings()
