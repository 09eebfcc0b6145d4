"""The warm pools' keeper and adoptions, against a real store and a stub of the
apiserver's pods and claims: the pool kept at its size, a burst adopting each pod
once (the rest cold), an Actor change replacing pooled pods and never adopted ones,
a pod relabelled for a Session the store never adopted deleted, the runner answered
before its pod is relabelled, and a crash between the two mended by the next pass."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from typing import Any

from helmr.control import SessionView
from helmr.control.adoptions import PooledPod
from helmr.control.views import limits_view
from helmr.kube.errors import NotFound
from helmr.kube.labels import LABEL_POOL, LABEL_POOLED, LABEL_SESSION_ID
from helmr.operator.disks.manifests import PoolDisk, WorkspaceRef
from helmr.operator.runners.adoption_answers import AskingPods
from helmr.operator.runners.adoption_writes import AdoptionWrites
from helmr.operator.runners.disk_gates import DiskGates
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.pods import DISK_GATE, gated_claim
from helmr.operator.runners.pool_adoptions import PoolAdoptions, takes_pooled_pod
from helmr.operator.runners.pool_pods import PoolSettings
from helmr.operator.runners.warm_pools import ASK_GRACE, WarmPools
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.resources import (
    Actor,
    ActorSpec,
    ActorStatus,
    ComputerSpec,
    EnvVar,
    ObjectMeta,
    Session,
    SessionSpec,
    WarmPoolSpec,
    Workspace,
)
from helmr.resources.session import ActorRef
from helmr.resources.session_env import EnvSource, SecretKeyRef, SessionEnv, SessionEnvVar
from helmr.store.rows import AdoptionRow
from tests.unit.control.harness import DEFAULT_LIMITS, Harness
from tests.unit.control.pooled import DISK
from tests.unit.operator.stub_kube import StubKube, any_resource


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
        if name not in self.pods:
            raise NotFound(f"pods {name} not found")
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

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return any_resource(kind, namespace, name)

    def run_all(self) -> None:
        running = {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}
        for pod in self.pods.values():
            pod["status"] = running

    def pooled(self) -> list[str]:
        return sorted(n for n, p in self.pods.items() if LABEL_POOL in p["metadata"]["labels"])

    def pooled_uids(self) -> list[str]:
        return [str(self.pods[name]["metadata"]["uid"]) for name in self.pooled()]

    def pods_by_uid(self, uid: str) -> dict[str, Any]:
        [pod] = [p for p in self.pods.values() if p["metadata"]["uid"] == uid]
        return pod


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif value is None:
            target.pop(key, None)
        else:
            target[key] = value


class PoolDisks:
    """Every Workspace takes a pooled claim; the Workspace the API made is noted."""

    def __init__(self) -> None:
        self.made: list[Workspace | None] = []

    async def pool_disk(
        self, namespace: str, name: str, actor: Actor, made: Workspace | None = None
    ) -> PoolDisk:
        self.made.append(made)
        return PoolDisk(WorkspaceRef(namespace, name, f"uid-{name}"), DISK)


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


class Pools:
    """A pool keeper and the adopter taking from it, as the control plane wires them."""

    def __init__(self, h: Harness, kube: PoolKube, gates: DiskGates | None = None) -> None:
        self.gone: list[AdoptionRow] = []
        self.kube = kube
        self.asking = AskingPods()
        self.now = 0.0
        self.disks = PoolDisks()
        writes = AdoptionWrites(h.control, kube, pod_gone=self._gone)
        metrics = WarmPoolMetrics()
        settings = PoolSettings(runner_url="http://helmr:8080")
        self.keeper = WarmPools(
            h.control,
            kube,
            writes,
            settings,
            metrics,
            asking=self.asking,
            gates=gates,
            clock=lambda: self.now,
        )
        self.adoptions = PoolAdoptions(
            h.control,
            kube,
            self.disks,  # type: ignore[arg-type]
            self.keeper,
            writes,
            RunnerPods(),
            metrics,
        )

    async def _gone(self, row: AdoptionRow) -> None:
        self.gone.append(row)

    def all_ask(self) -> None:
        """Every pod's runner asks to be adopted (its actor imported)."""
        for uid in self.kube.pooled_uids():
            self.asking.asked(uid)


async def opened(h: Harness, name: str) -> SessionView:
    """A new Session of the Actor, on a Workspace of its own (``ws-<name>``)."""
    return await h.control.open_session(
        namespace="team", name=name, actor="reviewer", workspace=f"ws-{name}"
    )


async def full_pool(h: Harness, kube: PoolKube, a: Actor) -> Pools:
    pools = Pools(h, kube)
    pools.keeper.seen(None, a)
    await pools.keeper.reconcile()
    kube.run_all()
    pools.all_ask()
    await pools.keeper.reconcile()
    return pools


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
    pools = await full_pool(h, kube, a)
    sessions = [await opened(h, f"s{n}") for n in range(4)]
    adopted = await asyncio.gather(
        *(pools.adoptions.adopt(session, owner(session.name), a) for session in sessions)
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
        assert pools.keeper.runner_pod(await h.control.get_session(sid)) == name
    # The pool refills; the adopted pods are not pooled any more.
    await pools.keeper.reconcile()
    assert len(kube.pooled()) == 2
    assert not {name for _, name in runners} & set(kube.pooled())


async def test_an_actor_change_replaces_pooled_pods_never_adopted_ones(h: Harness) -> None:
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    session = await opened(h, "s")
    assert await pools.adoptions.adopt(session, owner("s"), a)
    await pools.keeper.reconcile()
    before = set(kube.pooled())
    adopted = [n for n, p in kube.pods.items() if LABEL_SESSION_ID in p["metadata"]["labels"]]

    pools.keeper.seen("MODIFIED", actor(env=[EnvVar(name="A", value="2")]))
    await pools.keeper.reconcile()

    assert len(kube.pooled()) == 2
    assert not set(kube.pooled()) & before
    assert [n for n in adopted if n in kube.pods] == adopted


async def test_a_pod_labelled_for_a_session_the_store_never_adopted_is_deleted(
    h: Harness,
) -> None:
    """An older operator's crash between a pod's relabelling and the adoption's commit
    (it relabelled first)."""
    kube = PoolKube()
    pools = await full_pool(h, kube, actor())
    orphan = kube.pooled()[0]
    await kube.patch_pod(
        "team", orphan, {"metadata": {"labels": {LABEL_POOL: None, LABEL_SESSION_ID: "ses_x"}}}
    )
    await pools.keeper.reconcile()
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
    keeper = Pools(h, kube).keeper
    keeper.seen(None, actor(size=0))  # as listed when the operator starts
    for _ in range(3):
        await keeper.reconcile()
    keeper.seen("MODIFIED", actor(size=0))
    await keeper.reconcile()
    assert len(listed) == 1


async def test_a_session_naming_secrets_adopts_only_where_secrets_may_be_read(
    h: Harness,
) -> None:
    session = await opened(h, "s")
    ref = EnvSource(secret_key_ref=SecretKeyRef(name="llm", key="api-key"))
    secrets = SessionEnv.of([SessionEnvVar(name="KEY", value_from=ref)], None)
    plain = SessionEnv.of([SessionEnvVar(name="MODEL", value="small")], None)
    assert takes_pooled_pod(actor(), session, plain, read_secrets=False)
    assert not takes_pooled_pod(actor(), session, secrets, read_secrets=False)
    assert takes_pooled_pod(actor(), session, secrets, read_secrets=True)
    assert not takes_pooled_pod(actor(size=0), session, plain, read_secrets=True)


async def test_the_runner_is_answered_before_its_pod_is_relabelled(h: Harness) -> None:
    """The adoption's commit answers the pooled runner's poll; the pod's patches follow."""
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    session = await opened(h, "s")
    labels_when_answered: list[dict[str, str]] = []
    answered = asyncio.Event()

    async def poll(uid: str) -> None:
        await h.control.adoption(uid, 10)
        labels_when_answered.append(dict(kube.pods_by_uid(uid)["metadata"]["labels"]))
        answered.set()

    patching = kube.patch_pod

    async def after_the_answer(namespace: str, name: str, patch: dict[str, Any]) -> None:
        # Relabelling first, it would wait here in vain, then label before the answer.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(answered.wait(), 2)
        await patching(namespace, name, patch)

    kube.patch_pod = after_the_answer  # type: ignore[method-assign]
    polls = [asyncio.create_task(poll(uid)) for uid in kube.pooled_uids()]
    await asyncio.sleep(0)
    assert await pools.adoptions.adopt(session, owner("s"), a)
    [labels] = labels_when_answered
    assert LABEL_POOL in labels
    assert LABEL_SESSION_ID not in labels
    for task in polls:
        task.cancel()
    [runner] = [p for p in kube.pods.values() if LABEL_SESSION_ID in p["metadata"]["labels"]]
    assert runner["metadata"]["labels"][LABEL_SESSION_ID] == session.id
    assert LABEL_POOL not in kube.claims[runner["metadata"]["name"]]["metadata"]["labels"]


async def test_a_crash_between_the_commit_and_the_relabelling_is_mended_by_the_next_pass(
    h: Harness,
) -> None:
    """Adopted in the store only: the pod is not offered again, the next pass labels it
    as its Session's and its claim as the Workspace's, and the pool refills."""
    kube = PoolKube()
    await full_pool(h, kube, actor())
    session = await opened(h, "s")
    name = kube.pooled()[0]
    uid = kube.pods[name]["metadata"]["uid"]
    pod = PooledPod(namespace="team", name=name, uid=uid, claim=name)
    assert await h.control.adopt(session.id, 1, pod, DISK)

    # As a restarted operator's first pass finds it.
    restarted = Pools(h, kube)
    restarted.all_ask()
    restarted.keeper.seen(None, actor())
    await restarted.keeper.reconcile()

    labels = kube.pods[name]["metadata"]["labels"]
    assert LABEL_POOL not in labels
    assert labels[LABEL_SESSION_ID] == session.id
    assert [o["kind"] for o in kube.pods[name]["metadata"]["ownerReferences"]] == ["Session"]
    assert [o["kind"] for o in kube.claims[name]["metadata"]["ownerReferences"]] == ["Workspace"]
    assert name not in kube.pooled()
    kube.run_all()
    restarted.all_ask()
    await restarted.keeper.reconcile()
    assert len(kube.pooled()) == 2
    other = await opened(h, "t")
    assert await restarted.adoptions.adopt(other, owner("t"), actor())
    assert (await h.control.adopted_pod(other.id, 1)).pod_name != name  # type: ignore[union-attr]


async def test_an_adopted_pod_gone_before_its_relabelling_is_reported(h: Harness) -> None:
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    session = await opened(h, "s")
    deleting = kube.patch_pod

    async def deleted_first(namespace: str, name: str, patch: dict[str, Any]) -> None:
        kube.pods.pop(name)  # deleted (its node lost) as it was adopted
        await deleting(namespace, name, patch)

    kube.patch_pod = deleted_first  # type: ignore[method-assign]
    assert await pools.adoptions.adopt(session, owner("s"), a)
    [gone] = pools.gone
    assert (gone.session_id, gone.epoch) == (session.id, 1)


async def test_a_refused_adoption_gives_the_pod_back_untouched(h: Harness) -> None:
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    session = await opened(h, "s")
    await h.control.current_disk("team", "ws-s")  # its Workspace has a disk
    before = {n: dict(p["metadata"]["labels"]) for n, p in kube.pods.items()}

    assert not await pools.adoptions.adopt(session, owner("s"), a)

    assert {n: p["metadata"]["labels"] for n, p in kube.pods.items()} == before
    fresh = await opened(h, "t")
    second = await opened(h, "u")
    assert await pools.adoptions.adopt(fresh, owner("t"), a)
    assert await pools.adoptions.adopt(second, owner("u"), a)  # both pods offered still


async def test_a_running_pod_is_offered_once_its_runner_asks_to_be_adopted(h: Harness) -> None:
    """Running, its runner may still be importing the actor: offered once it asks
    (here), or once it has run ASK_GRACE seconds (it may ask another replica)."""
    kube = PoolKube()
    a = actor(size=1)
    pools = Pools(h, kube)
    pools.keeper.seen(None, a)
    await pools.keeper.reconcile()
    kube.run_all()
    await pools.keeper.reconcile()
    assert not await pools.adoptions.adopt(await opened(h, "s"), owner("s"), a)

    pools.all_ask()
    await pools.keeper.reconcile()
    assert await pools.adoptions.adopt(await opened(h, "t"), owner("t"), a)

    await pools.keeper.reconcile()  # its refill
    kube.run_all()
    await pools.keeper.reconcile()
    assert not await pools.adoptions.adopt(await opened(h, "u"), owner("u"), a)
    pools.now += ASK_GRACE
    await pools.keeper.reconcile()
    assert await pools.adoptions.adopt(await opened(h, "v"), owner("v"), a)


class GatingPoolKube(PoolKube):
    """Its claims bound once ``bind_all`` says so; gates removed as the apiserver would."""

    def __init__(self) -> None:
        super().__init__()
        self.ungated: list[str] = []

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claims.get(name)

    async def remove_scheduling_gate(self, namespace: str, name: str, gate: str) -> None:
        self.ungated.append(name)
        self.pods[name]["spec"]["schedulingGates"] = []

    def bind_all(self) -> None:
        for claim in self.claims.values():
            claim["status"] = {"phase": "Bound"}


async def test_a_pooled_pod_of_a_disk_bound_as_made_waits_gated_for_its_claim(
    h: Harness,
) -> None:
    kube = GatingPoolKube()

    async def binds_at_once(computer: ComputerSpec) -> bool:
        return True

    gates = DiskGates(kube, give_up_after=60, binds_at_once=binds_at_once, first_wait=0.001)
    pools = Pools(h, kube, gates)
    pools.keeper.seen(None, actor(size=1))
    await pools.keeper.reconcile()
    [name] = kube.pooled()
    assert gated_claim(kube.pods[name]) == name  # its own claim, made after it

    await asyncio.sleep(0.02)
    assert kube.ungated == []  # not before the claim is bound
    kube.bind_all()
    await gates.drained()
    assert kube.ungated == [name]

    # A replica that made it gated is gone: the next keeper's pass follows it.
    kube.pods[name]["spec"]["schedulingGates"] = [{"name": DISK_GATE}]
    kube.ungated.clear()
    await pools.keeper.reconcile()
    await gates.drained()
    assert kube.ungated == [name]


async def test_a_new_sessions_limits_are_resolved_by_its_adoptions_own_transaction(
    h: Harness,
) -> None:
    """Opened since the last pass, a Session's limits are unresolved at its start: the
    adoption's one write resolves them, not a write of their own before it."""
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    session = await opened(h, "s")
    assert session.limits is None
    transactions: Counter[str] = Counter()
    h.store.observe = lambda kind, lane, seconds: transactions.update((kind,))

    assert await pools.adoptions.adopt(session, owner("s"), a, DEFAULT_LIMITS)

    assert transactions["write"] == 1
    adopted = await h.control.get_session(session.id)
    assert (adopted.process_epoch, adopted.limits) == (1, limits_view(DEFAULT_LIMITS))


async def test_an_adoption_takes_the_workspace_the_api_made_at_the_sessions_start(
    h: Harness,
) -> None:
    kube = PoolKube()
    a = actor()
    pools = await full_pool(h, kube, a)
    made = any_resource(Workspace, "team", "ws-s")
    assert await pools.adoptions.adopt(await opened(h, "s"), owner("s"), a, workspace=made)
    assert await pools.adoptions.adopt(await opened(h, "t"), owner("t"), a)
    assert pools.disks.made == [made, None]
