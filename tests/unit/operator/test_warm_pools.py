"""The warm pools' keeper and adoptions, against a real store and a stub of the
apiserver's pods and claims: the pool kept at its size, a burst adopting each pod
once (the rest cold), an Actor change replacing pooled pods and never adopted ones,
and a pod relabelled for a Session the store never adopted deleted."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from helmr.kube.labels import LABEL_POOL, LABEL_POOLED, LABEL_SESSION_ID
from helmr.operator.disks.manifests import WorkspaceRef
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.pool_pods import PoolSettings
from helmr.operator.runners.warm_pools import WarmPools, takes_pooled_pod
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.resources import (
    Actor,
    ActorSpec,
    ActorStatus,
    EnvVar,
    ObjectMeta,
    Session,
    SessionSpec,
    WarmPoolSpec,
)
from helmr.resources.session import ActorRef
from helmr.resources.session_env import EnvSource, SecretKeyRef, SessionEnv, SessionEnvVar
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube


class PoolKube(StubKube):
    """Pods and claims kept in memory; a pod is Running once ``run_all`` says so."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self._uids = itertools.count(1)

    async def list_whole_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        key, _, value = selector.partition("=")
        return [p for p in self.pods.values() if p["metadata"]["labels"].get(key) == value]

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        body["metadata"]["uid"] = f"uid-{next(self._uids)}"
        body["status"] = {"phase": "Pending"}
        self.pods[body["metadata"]["name"]] = body
        return str(body["metadata"]["uid"])

    async def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> None:
        self.deleted_pods.append(name)
        self.pods.pop(name, None)

    async def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        _merge(self.pods[name]["metadata"], patch["metadata"])

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> None:
        self.claims.setdefault(body["metadata"]["name"], body)

    async def patch_claim(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        _merge(self.claims[name]["metadata"], patch["metadata"])

    async def delete_claim(self, namespace: str, name: str) -> None:
        self.claims.pop(name, None)

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        key, _, value = selector.partition("=")
        return [n for n, c in self.claims.items() if c["metadata"]["labels"].get(key) == value]

    async def ensure_service_account(self, namespace: str, body: dict[str, Any]) -> None:
        return None

    def run_all(self) -> None:
        running = {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}
        for pod in self.pods.values():
            pod["status"] = running

    def pooled(self) -> list[str]:
        return sorted(n for n, p in self.pods.items() if LABEL_POOL in p["metadata"]["labels"])


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif value is None:
            target.pop(key, None)
        else:
            target[key] = value


class PoolDisks:
    async def pool_workspace(self, namespace: str, name: str, actor: Actor) -> WorkspaceRef:
        return WorkspaceRef(namespace, name, f"uid-{name}")


def actor(size: int = 2, **spec: Any) -> Actor:
    fields = {"image": "runner:1", "entrypoint": "app:agent", "warm_pool": WarmPoolSpec(size=size)}
    return Actor(
        metadata=ObjectMeta(name="reviewer", namespace="team", uid="actor-uid"),
        spec=ActorSpec.model_validate(fields | spec),
    )


def owner(name: str) -> Session:
    return Session(
        metadata=ObjectMeta(name=name, namespace="team", uid=f"uid-{name}"),
        spec=SessionSpec(actor_ref=ActorRef(name="reviewer"), workspace=f"ws-{name}"),
    )


def pools(h: Harness, kube: PoolKube) -> WarmPools:
    return WarmPools(
        h.control,
        kube,
        PoolDisks(),  # type: ignore[arg-type]
        RunnerPods(),
        PoolSettings(runner_url="http://helmr:8080"),
        WarmPoolMetrics(),
    )


async def full_pool(h: Harness, kube: PoolKube, a: Actor) -> WarmPools:
    keeper = pools(h, kube)
    keeper.seen(None, a)
    await keeper.reconcile()
    kube.run_all()
    await keeper.reconcile()
    return keeper


async def test_the_pool_is_kept_at_its_size_each_pod_with_its_claim(h: Harness) -> None:
    kube = PoolKube()
    await full_pool(h, kube, actor())
    assert len(kube.pooled()) == 2
    assert sorted(kube.claims) == kube.pooled()
    status = kube.statuses[("Actor", "reviewer")]
    assert isinstance(status, ActorStatus)
    assert status.warm_pool is not None
    assert (status.warm_pool.size, status.warm_pool.ready) == (2, 2)


async def test_a_burst_adopts_each_pooled_pod_once_and_the_rest_start_cold(h: Harness) -> None:
    kube = PoolKube()
    a = actor()
    keeper = await full_pool(h, kube, a)
    sessions = [
        await h.control.open_session(
            namespace="team", name=f"s{n}", actor="reviewer", workspace=f"ws-s{n}"
        )
        for n in range(4)
    ]
    adopted = await asyncio.gather(
        *(keeper.adopt(session, owner(session.name), a) for session in sessions)
    )
    assert sorted(adopted) == [False, False, True, True]
    runners = [
        (p["metadata"]["labels"][LABEL_SESSION_ID], name)
        for name, p in kube.pods.items()
        if LABEL_SESSION_ID in p["metadata"]["labels"]
    ]
    assert len(runners) == 2
    assert len({sid for sid, _ in runners}) == 2
    for sid, name in runners:
        row = await h.control.adopted_pod(sid, 1)
        assert row is not None
        assert row.pod_name == name
        # The Session's status names its pod (the status mirror asks the pools).
        assert keeper.runner_pod(await h.control.get_session(sid)) == name
    # The pool refills; the adopted pods are not pooled any more.
    await keeper.reconcile()
    assert len(kube.pooled()) == 2
    assert not {name for _, name in runners} & set(kube.pooled())


async def test_an_actor_change_replaces_pooled_pods_never_adopted_ones(h: Harness) -> None:
    kube = PoolKube()
    a = actor()
    keeper = await full_pool(h, kube, a)
    session = await h.control.open_session(
        namespace="team", name="s", actor="reviewer", workspace="ws-s"
    )
    assert await keeper.adopt(session, owner("s"), a)
    await keeper.reconcile()
    before = set(kube.pooled())
    adopted = [n for n, p in kube.pods.items() if LABEL_SESSION_ID in p["metadata"]["labels"]]

    keeper.seen("MODIFIED", actor(env=[EnvVar(name="A", value="2")]))
    await keeper.reconcile()

    assert len(kube.pooled()) == 2
    assert not set(kube.pooled()) & before
    assert [n for n in adopted if n in kube.pods] == adopted


async def test_a_pod_labelled_for_a_session_the_store_never_adopted_is_deleted(
    h: Harness,
) -> None:
    """A crash between a pod's relabelling and the adoption's commit."""
    kube = PoolKube()
    keeper = await full_pool(h, kube, actor())
    orphan = kube.pooled()[0]
    await kube.patch_pod(
        "team", orphan, {"metadata": {"labels": {LABEL_POOL: None, LABEL_SESSION_ID: "ses_x"}}}
    )
    await keeper.reconcile()
    assert orphan not in kube.pods
    assert orphan not in kube.claims
    assert len(kube.pooled()) == 2
    assert all(p["metadata"]["labels"][LABEL_POOLED] == "reviewer" for p in kube.pods.values())


async def test_an_actor_without_a_pool_costs_one_listing_at_most(h: Harness) -> None:
    kube = PoolKube()
    listed: list[str] = []
    listing = kube.list_whole_pods

    async def counted(namespace: str, selector: str) -> list[dict[str, Any]]:
        listed.append(selector)
        return await listing(namespace, selector)

    kube.list_whole_pods = counted  # type: ignore[method-assign]
    keeper = pools(h, kube)
    keeper.seen(None, actor(size=0))  # as listed when the operator starts
    for _ in range(3):
        await keeper.reconcile()
    keeper.seen("MODIFIED", actor(size=0))
    await keeper.reconcile()
    assert len(listed) == 1


async def test_a_session_naming_secrets_adopts_only_where_secrets_may_be_read(
    h: Harness,
) -> None:
    session = await h.control.open_session(
        namespace="team", name="s", actor="reviewer", workspace="ws-s"
    )
    ref = EnvSource(secret_key_ref=SecretKeyRef(name="llm", key="api-key"))
    secrets = SessionEnv.of([SessionEnvVar(name="KEY", value_from=ref)], None)
    plain = SessionEnv.of([SessionEnvVar(name="MODEL", value="small")], None)
    assert takes_pooled_pod(actor(), session, plain, read_secrets=False)
    assert not takes_pooled_pod(actor(), session, secrets, read_secrets=False)
    assert takes_pooled_pod(actor(), session, secrets, read_secrets=True)
    assert not takes_pooled_pod(actor(size=0), session, plain, read_secrets=True)
