"""The chart's replicas: one on SQLite (the schema refuses more), several on
PostgreSQL with a Lease to elect the leader by, a PodDisruptionBudget and
anti-affinity. Rendered by the real helm binary (see test_chart.py)."""

from __future__ import annotations

import pytest

from tests.unit.test_chart import (
    NAMESPACE,
    Manifest,
    env,
    of_kind,
    one,
    pod_spec,
    render,
    render_error,
)

pytestmark = pytest.mark.helm

POSTGRES = {"store.postgres.existingSecret": "helmr-pg", "replicas": "2"}
LEASE_ROLE = "helmr-leader-election"


def leader_role(manifests: list[Manifest]) -> Manifest:
    [role] = [r for r in of_kind(manifests, "Role") if r["metadata"]["name"] == LEASE_ROLE]
    return role


@pytest.fixture(scope="module")
def on_postgres() -> list[Manifest]:
    return render(POSTGRES)


def test_sqlite_refuses_more_than_one_replica() -> None:
    for count in ("2", "3"):
        assert "existingSecret" in render_error({"replicas": count})
    # Naming the secret but no replica count is one PostgreSQL replica.
    assert (
        one(render({"store.postgres.existingSecret": "pg"}), "Deployment")["spec"]["replicas"] == 1
    )


def test_sqlite_is_one_recreated_replica_without_election() -> None:
    default = render()
    spec = one(default, "Deployment")["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})
    assert "HELMR_LEADER_LEASE" not in env(default)
    assert "HELMR_STORE_URL" not in env(default)
    assert not of_kind(default, "PodDisruptionBudget")
    assert not [r for r in of_kind(default, "Role") if r["metadata"]["name"] == LEASE_ROLE]
    assert "affinity" not in pod_spec(default)


def test_postgres_replicas_read_the_url_from_the_secret_and_elect_by_a_lease(
    on_postgres: list[Manifest],
) -> None:
    spec = one(on_postgres, "Deployment")["spec"]
    assert spec["replicas"] == 2
    assert "strategy" not in spec  # a rolling update: the others keep serving
    variables = env(on_postgres)
    assert variables["HELMR_STORE_URL"] == {"secretKeyRef": {"name": "helmr-pg", "key": "url"}}
    assert variables["HELMR_LEADER_LEASE"] == f"{NAMESPACE}/helmr-leader"
    assert variables["HELMR_LEADER_LEASE_SECONDS"] == "15"
    # No SQLite volume to claim.
    assert not of_kind(on_postgres, "PersistentVolumeClaim")
    data = next(v for v in pod_spec(on_postgres)["volumes"] if v["name"] == "data")
    assert data == {"name": "data", "emptyDir": {}}


def test_lease_rights_are_the_release_namespace_s_one_lease(on_postgres: list[Manifest]) -> None:
    role = leader_role(on_postgres)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["helmr-leader"],
            "verbs": ["get", "update"],
        },
    ]
    [binding] = [
        b for b in of_kind(on_postgres, "RoleBinding") if b["roleRef"]["name"] == LEASE_ROLE
    ]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "helmr", "namespace": NAMESPACE}
    ]
    # Nothing cluster-wide about leases.
    for cluster_role in of_kind(on_postgres, "ClusterRole"):
        assert not [r for r in cluster_role["rules"] if "coordination.k8s.io" in r["apiGroups"]]


def test_replicas_get_a_disruption_budget_and_spread_over_nodes(
    on_postgres: list[Manifest],
) -> None:
    budget = one(on_postgres, "PodDisruptionBudget")
    selector = one(on_postgres, "Deployment")["spec"]["selector"]
    assert budget["spec"] == {"maxUnavailable": 1, "selector": selector}
    [term] = pod_spec(on_postgres)["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": selector,
    }


def test_ones_own_affinity_replaces_the_spreading() -> None:
    term = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    manifests = render({**POSTGRES, f"{term}.nodeSelectorTerms[0].matchExpressions[0].key": "z"})
    assert list(pod_spec(manifests)["affinity"]) == ["nodeAffinity"]


def test_one_postgres_replica_has_no_budget() -> None:
    manifests = render({"store.postgres.existingSecret": "pg"})
    assert not of_kind(manifests, "PodDisruptionBudget")
    assert "affinity" not in pod_spec(manifests)
    assert "HELMR_LEADER_LEASE" in env(manifests)
