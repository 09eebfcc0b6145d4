"""The chart's egress proxy (egressProxy): a Deployment, Service, NetworkPolicy and
service account of its own, restricted, reading runner pods and Actors alone; and
the operator told where it is. Rendered by the real helm binary (see test_chart.py)."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.operator.runners.network_policies import containment
from helmr.operator.settings import Settings
from tests.unit.test_chart import (
    CLUSTER_RULES,
    NAMESPACE,
    NAMESPACED_RULES,
    Manifest,
    env,
    grants,
    of_kind,
    render,
    render_error,
    restricted_violations,
)

pytestmark = pytest.mark.helm

ENABLED = {"egressProxy.enabled": "true"}
NAME = "helmr-egress-proxy"
PROXY_RULES = {("", "pods"): {"list", "watch"}, ("helmr.dev", "actors"): {"list", "watch"}}
"""Whose address is whose, and what each Actor allows: nothing else."""


def named(manifests: list[Manifest], kind: str, name: str = NAME) -> list[Manifest]:
    return [m for m in of_kind(manifests, kind) if m["metadata"]["name"].endswith(name)]


def operator_env(manifests: list[Manifest]) -> dict[str, Any]:
    return env([m for m in manifests if m["metadata"]["name"] != NAME])


def proxy_pod(manifests: list[Manifest]) -> dict[str, Any]:
    [deployment] = named(manifests, "Deployment")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def test_off_by_default() -> None:
    default = render()
    assert not [m for m in default if "egress" in m["metadata"]["name"]]
    assert "HELMR_EGRESS_PROXY_URL" not in env(default)


@pytest.fixture(scope="module")
def enabled() -> list[Manifest]:
    return render(ENABLED)


def test_its_pod_is_restricted_and_runs_the_proxy(enabled: list[Manifest]) -> None:
    spec = proxy_pod(enabled)
    assert restricted_violations(spec) == []
    assert spec["serviceAccountName"] == NAME
    [proxy] = spec["containers"]
    assert proxy["image"] == "helmr.local/egress-proxy:dev"
    assert [*proxy["command"], *proxy["args"]] == ["python3", "-m", "helmr.egress", "--port=3128"]
    assert {"name": "proxy", "containerPort": 3128, "protocol": "TCP"} in proxy["ports"]
    [service] = named(enabled, "Service")
    assert service["spec"]["ports"] == [
        {"name": "proxy", "port": 3128, "targetPort": "proxy", "protocol": "TCP"}
    ]


def test_it_reads_runner_pods_and_actors_alone(enabled: list[Manifest]) -> None:
    [role] = named(enabled, "ClusterRole")
    assert grants(role) == PROXY_RULES
    [binding] = named(enabled, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    # The control plane's own rules are as they were.
    [own] = [r for r in of_kind(enabled, "ClusterRole") if r is not role]
    assert grants(own) == CLUSTER_RULES | NAMESPACED_RULES


def test_with_watched_namespaces_it_reads_only_there() -> None:
    manifests = render(ENABLED | {"watchNamespaces": "{team-a,team-b}"})
    assert not named(manifests, "ClusterRole")
    roles = named(manifests, "Role")
    assert {r["metadata"]["namespace"] for r in roles} == {"team-a", "team-b"}
    assert all(grants(r) == PROXY_RULES for r in roles)
    assert {b["metadata"]["namespace"] for b in named(manifests, "RoleBinding")} == {
        "team-a",
        "team-b",
    }
    [proxy] = proxy_pod(manifests)["containers"]
    assert {"name": "HELMR_WATCH_NAMESPACES", "value": "team-a,team-b"} in proxy["env"]


def test_only_runner_pods_reach_it(enabled: list[Manifest]) -> None:
    [policy] = named(enabled, "NetworkPolicy")
    [deployment] = named(enabled, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 3128, "protocol": "TCP"}]
    assert rule["from"] == [
        {"podSelector": {"matchLabels": {"helmr.dev/component": "runner"}}, "namespaceSelector": {}}
    ]


def test_the_operator_is_told_where_it_is(
    monkeypatch: pytest.MonkeyPatch, enabled: list[Manifest]
) -> None:
    rendered = operator_env(enabled)
    assert rendered["HELMR_EGRESS_PROXY_URL"] == f"http://{NAME}.{NAMESPACE}.svc:3128"
    for name in ("HELMR_EGRESS_PROXY_URL", "HELMR_EGRESS_PROXY_PEERS", "HELMR_EGRESS_PROXY_PORT"):
        monkeypatch.setenv(name, rendered[name])
    contained = containment(Settings())
    assert contained is not None
    [peer] = contained.egress_proxy
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    [deployment] = named(enabled, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"].items() <= labels.items()
    assert contained.egress_proxy_port == 3128


def test_its_values_are_checked() -> None:
    assert "/egressProxy/port" in render_error(ENABLED | {"egressProxy.port": "0"})
    assert "egressProxy" in render_error({"egressProxy.listen": "x"})
