"""The chart's `helm test` hook (templates/tests/smoke.yaml): what it declares,
where, and that it cannot be mistaken for the control plane. It is run against
an installed release in tests/cluster/test_chart_release.py."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from tests.unit.test_chart import (
    CHART,
    NAMESPACE,
    Manifest,
    of_kind,
    one,
    render,
    restricted_violations,
)

pytestmark = pytest.mark.helm


def hooks(values: dict[str, str] | None = None) -> list[Manifest]:
    return [
        m
        for m in render(values, tests=True)
        if (m["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"
    ]


def test_the_hook_is_a_session_client_with_just_the_session_verbs() -> None:
    found = hooks()
    assert sorted(m["kind"] for m in found) == [
        "Actor",
        "Pod",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    assert {m["metadata"]["namespace"] for m in found} == {NAMESPACE}
    (rule,) = one(found, "Role")["rules"]
    assert rule == {
        "apiGroups": ["helmr.dev"],
        "resources": ["sessions"],
        "verbs": ["get", "create", "update"],
    }
    for m in found:
        policy = m["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        # The Pod stays for `helm test --logs`; the next run replaces it.
        kept = m["kind"] == "Pod"
        assert policy == "before-hook-creation" + ("" if kept else ",hook-succeeded")
    # Everything the Pod needs exists before it: a lower hook weight.
    for m in found:
        weight = int(m["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))
        assert weight == (0 if m["kind"] == "Pod" else -1), m["kind"]


def test_the_pod_runs_the_smoke_script_against_the_release_service() -> None:
    pod = one(hooks(), "Pod")
    (c,) = pod["spec"]["containers"]
    assert c["command"][:2] == ["python3", "-c"]
    assert c["command"][2] == (CHART / "files" / "smoke_test.py").read_text()
    ast.parse(c["command"][2])
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["HELMR_URL"] == f"http://helmr.{NAMESPACE}.svc:8080"
    assert pod["spec"]["serviceAccountName"] == env["SMOKE_ACTOR"] == "helmr-smoke"
    assert restricted_violations(pod["spec"]) == []


def test_no_hook_is_selected_by_the_control_plane_service() -> None:
    manifests = render(tests=True)
    selector = one(manifests, "Service")["spec"]["selector"]
    for m in hooks():
        labels: dict[str, Any] = m["metadata"]["labels"]
        assert not selector.items() <= labels.items(), m["kind"]


def test_the_hook_runs_in_a_served_namespace() -> None:
    watched = {"watchNamespaces": "{team-a,team-b}"}
    assert {m["metadata"]["namespace"] for m in hooks(watched)} == {"team-a"}
    chosen = {**watched, "tests.namespace": "team-b"}
    assert {m["metadata"]["namespace"] for m in hooks(chosen)} == {"team-b"}
    assert not hooks({"tests.enabled": "false"})
    assert of_kind(render(tests=False), "Pod") == []
