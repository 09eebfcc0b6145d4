"""A warm pool's pods and claims: a cold runner pod less its Session, hashed by spec."""

from __future__ import annotations

from helmr.kube.labels import (
    LABEL_DISK,
    LABEL_EPOCH,
    LABEL_POOL,
    LABEL_POOLED,
    LABEL_SESSION_ID,
    LABEL_WORKSPACE,
)
from helmr.operator.disks.manifests import WorkspaceRef
from helmr.operator.runners.pool_pods import (
    PoolSettings,
    adopted_claim_patch,
    adopted_pod_patch,
    build_pooled_claim,
    build_pooled_pod,
    pool_hash,
)
from helmr.protocol import contract
from helmr.resources import Actor, ActorSpec, ComputerSpec, EnvVar, ObjectMeta, WarmPoolSpec

SETTINGS = PoolSettings(runner_url="http://helmr:8080")


def actor(**spec: object) -> Actor:
    fields = {"image": "runner:1", "entrypoint": "app:agent", "warm_pool": WarmPoolSpec(size=2)}
    return Actor(
        metadata=ObjectMeta(name="reviewer", namespace="team", uid="actor-uid"),
        spec=ActorSpec.model_validate(fields | spec),
    )


def env(pod: dict[str, object]) -> dict[str, str]:
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    return {var["name"]: var.get("value") for var in container["env"]}


def test_a_pooled_pod_is_a_runner_pod_without_a_session() -> None:
    a = actor(env=[EnvVar(name="LOG_LEVEL", value="debug")])
    digest = pool_hash(a, SETTINGS)
    pod = build_pooled_pod(a, SETTINGS, "reviewer-pool-1", digest)

    labels = pod["metadata"]["labels"]
    assert labels[LABEL_POOL] == digest
    assert labels[LABEL_POOLED] == "reviewer"
    assert LABEL_SESSION_ID not in labels
    assert LABEL_EPOCH not in labels
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Actor"
    variables = env(pod)
    assert variables[contract.ENV_POOL] == "reviewer"
    assert contract.ENV_SESSION_ID not in variables
    assert contract.ENV_PROCESS_EPOCH not in variables
    assert variables["LOG_LEVEL"] == "debug"
    claims = [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims[0]["persistentVolumeClaim"]["claimName"] == "reviewer-pool-1"


def test_the_hash_follows_what_makes_the_pod_and_its_claim() -> None:
    same = pool_hash(actor(), SETTINGS)
    assert pool_hash(actor(), SETTINGS) == same
    # The pool's size is no part of a pod.
    assert pool_hash(actor(warm_pool=WarmPoolSpec(size=5)), SETTINGS) == same
    changed = [
        actor(image="runner:2"),
        actor(entrypoint="app:other"),
        actor(env=[EnvVar(name="A", value="1")]),
        actor(computer=ComputerSpec(size="2Gi")),
    ]
    hashes = {pool_hash(a, SETTINGS) for a in changed}
    assert same not in hashes
    assert len(hashes) == len(changed)
    assert pool_hash(actor(), PoolSettings(runner_url="http://other:8080")) != same


def test_a_pooled_claim_is_owned_by_its_pod_until_adopted_by_the_workspace() -> None:
    a = actor(computer=ComputerSpec(size="3Gi"))
    claim = build_pooled_claim(a, "reviewer-pool-1", "h", "pod-uid")
    assert claim["spec"]["resources"]["requests"]["storage"] == "3Gi"
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "reviewer-pool-1", "uid": "pod-uid"}
    ]
    patch = adopted_claim_patch(WorkspaceRef("team", "ws", "ws-uid"))["metadata"]
    assert patch["labels"] == {LABEL_POOL: None, LABEL_WORKSPACE: "ws", LABEL_DISK: "1"}
    assert [owner["kind"] for owner in patch["ownerReferences"]] == ["Workspace"]


def test_an_adopted_pod_is_labelled_and_owned_as_its_sessions() -> None:
    patch = adopted_pod_patch("review", "session-uid", "ses_1", 1)["metadata"]
    assert patch["labels"][LABEL_POOL] is None
    assert (patch["labels"][LABEL_SESSION_ID], patch["labels"][LABEL_EPOCH]) == ("ses_1", "1")
    assert [(o["kind"], o["uid"]) for o in patch["ownerReferences"]] == [("Session", "session-uid")]
