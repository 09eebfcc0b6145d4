"""Warm pools: runner pods kept Running per Actor, adopted by new Sessions (DESIGN 8).

The leader keeps ``spec.warmPool.size`` pooled pods (:mod:`.pool_pods`) of each Actor
that asks for some, each with a fresh claim of its own, and deletes pooled pods its
Actor's spec no longer makes (their hash label differs) or that ended. Adopted pods
are never touched here: they are their Session's, as a cold start's pod is.

A new Session's first start takes a pooled pod that is Running (:meth:`WarmPools.take`,
from :mod:`.pool_adoptions`); its adoption is committed in the store first, which
answers the pod's adoption long poll, and its pod and claim are relabelled after
(:mod:`.adoption_writes`). A crash between leaves a pod labelled pooled whose uid the
store says is adopted: each pass writes what such a pod lacks, and never offers it
again. Nothing is in memory that a restart needs: pods are found by label,
adoptions in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helmr.control import SessionView
from helmr.control.adoptions import PooledPod
from helmr.control.operator_api import OperatorControl
from helmr.kube.client import Kube, namespace_terminating
from helmr.kube.errors import KubeError
from helmr.kube.labels import LABEL_EPOCH, LABEL_POOL, LABEL_POOLED, LABEL_SESSION, LABEL_SESSION_ID
from helmr.operator.runners.adoption_answers import AskingPods
from helmr.operator.runners.adoption_writes import AdoptionWrites
from helmr.operator.runners.disk_gates import DiskGates
from helmr.operator.runners.network_policies import RunnerPolicies
from helmr.operator.runners.pods import build_service_account_spec, gated_claim, pod_name
from helmr.operator.runners.pool_pods import (
    PoolSettings,
    build_pooled_claim,
    build_pooled_pod,
    pool_hash,
)
from helmr.operator.runners.preparation import container_started
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.resources import Actor, ActorStatus, WarmPoolStatus

log = logging.getLogger(__name__)

POOL_INTERVAL = 1.0
"""Seconds between two passes over the pools (sooner after an adoption or an Actor change)."""
ASK_GRACE = 30.0
"""Seconds after its container started that a pooled pod is offered even if its runner
never asked this replica to be adopted (it may ask another replica)."""

ActorKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Pod:
    name: str
    uid: str
    labels: dict[str, str]
    phase: str
    started: bool
    deleting: bool
    gated_claim: str | None = None
    """The claim its scheduling gate waits for (helmr.operator.runners.disk_gates)."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> _Pod:
        metadata = body["metadata"]
        return cls(
            name=metadata["name"],
            uid=metadata["uid"],
            labels=metadata.get("labels") or {},
            phase=(body.get("status") or {}).get("phase") or "Pending",
            started=container_started(body),
            deleting=metadata.get("deletionTimestamp") is not None,
            gated_claim=gated_claim(body),
        )

    @property
    def pooled(self) -> bool:
        return LABEL_POOL in self.labels

    @property
    def ended(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class WarmPools:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube,
        writes: AdoptionWrites,
        settings: PoolSettings,
        metrics: WarmPoolMetrics,
        *,
        policies: RunnerPolicies | None = None,
        asking: AskingPods | None = None,
        gates: DiskGates | None = None,
        interval: float = POOL_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``writes``: the adoptions' Kubernetes side, for those a crash left unwritten;
        ``asking``: the pods whose runners asked to be adopted, the only ones offered
        (or those started :data:`ASK_GRACE` ago); ``gates``: whether a pooled pod is
        made gated, and what ungates it (none given: never gated)."""
        self._gates = gates
        self._asking = asking or AskingPods()
        self._asking.first_asked = self.wake
        self._clock = clock
        # When each pooled pod was first listed started, and its Actor.
        self._started_at: dict[str, tuple[ActorKey, float]] = {}
        self._control = control
        self._kube = kube
        self._writes = writes
        self._settings = settings
        self._metrics = metrics
        self._policies = policies
        self._interval = interval
        self._wake = asyncio.Event()
        # The Actors with a pool, or that may have pods of one (each Actor seen when
        # this process started, until a pass finds none), as last seen (kopf's watch):
        # the others cost no listing.
        self._actors: dict[ActorKey, Actor] = {}
        # Per Actor, the pooled pods Running at the last pass, newest last, not yet taken.
        self._ready: dict[ActorKey, list[_Pod]] = {}
        # Pods this process took from each Actor's pool, by uid: never offered again,
        # even by a listing made before their adoption, and relabelled by their adopter,
        # not by a pass whose listing came before its patches (forgotten once unlisted,
        # or once their adopter's patches failed: then a pass writes them).
        self._taken: dict[str, tuple[ActorKey, _Pod]] = {}
        self._statuses: dict[ActorKey, WarmPoolStatus] = {}
        # The adopted pods' names by Session: (its process's epoch, the pod's name); set
        # at adoption, and from the pools' listings after a restart.
        self._adopted_names: dict[str, tuple[int, str, ActorKey]] = {}

    def seen(self, event_type: str | None, actor: Actor) -> None:
        """An Actor's watch event (``type`` None: kopf's initial listing)."""
        key = (actor.metadata.namespace or "", actor.metadata.name or "")
        if event_type == "DELETED":
            self._actors.pop(key, None)  # its pooled pods go with it (owner references)
            self._ready.pop(key, None)
            self._statuses.pop(key, None)
        elif pool_size(actor) > 0 or key in self._actors or event_type is None:
            self._actors[key] = actor
        else:
            return
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def watched(self, key: ActorKey) -> Actor | None:
        """The Actor ``key`` as kopf's watch last delivered it, if it is kept here (it
        has a pool, or had one): a start of its Sessions need not read it."""
        return self._actors.get(key)

    async def run(self) -> None:
        """Never raises: it runs beside the rest of the leader's work."""
        while True:
            try:
                await self.reconcile()
            except Exception:
                log.exception("warm pool pass failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()

    async def reconcile(self) -> None:
        """One pass over every Actor's pool; one Actor's failure leaves the others kept."""
        for key, actor in list(self._actors.items()):
            try:
                await self._keep(key, actor)
            except Exception as exc:
                if namespace_terminating(exc):  # its pods and claims go with it
                    self._actors.pop(key, None)
                    self._ready.pop(key, None)
                    continue
                log.exception("warm pool of Actor %s/%s: a pass failed; retrying", *key)
        self._metrics.size.set(sum(pool_size(actor) for actor in self._actors.values()))
        self._metrics.ready.set(sum(len(pods) for pods in self._ready.values()))

    async def _keep(self, key: ActorKey, actor: Actor) -> None:
        namespace, name = key
        size = pool_size(actor)
        bodies = await self._kube.list_whole_pods(namespace, f"{LABEL_POOLED}={name}")
        if not bodies and size == 0:
            self._ready.pop(key, None)
            self._actors.pop(key, None)  # no pool, and nothing left of one
            return
        pods = [_Pod.of(body) for body in bodies]
        listed = {pod.uid for pod in pods}
        for uid in [uid for uid, (owner, _) in self._taken.items() if owner == key]:
            if uid not in listed:
                del self._taken[uid]
        for uid in [uid for uid, (owner, _) in self._started_at.items() if owner == key]:
            if uid not in listed:
                del self._started_at[uid]
                self._asking.forget(uid)
        names = {pod.name for pod in pods}
        for session_id, (_, name, owner) in list(self._adopted_names.items()):
            if owner == key and name not in names:
                del self._adopted_names[session_id]
        adopted, running = await self._adopted(key, pods)
        digest = pool_hash(actor, self._settings)
        live: list[_Pod] = []
        for pod in (p for p in pods if p.pooled and not p.deleting and p.uid not in adopted):
            if pod.labels[LABEL_POOL] != digest or pod.ended:
                reason = "ended" if pod.ended else "changed"
                log.info(
                    "warm pool %s/%s: replacing pod %s (%s)", namespace, name, pod.name, reason
                )
                self._metrics.replaced.labels(reason).inc()
                await self._kube.delete_pod(namespace, pod.name)
            else:
                live.append(pod)
        for extra in sorted(live, key=lambda pod: pod.started)[: max(len(live) - size, 0)]:
            await self._kube.delete_pod(namespace, extra.name)
            live.remove(extra)
        await self._claim_each(actor, live, digest)
        for _ in range(size - len(live)):
            live.append(await self._refill(actor, digest))
        self._ready[key] = [pod for pod in live if self._offered(key, pod)]
        await self._write_status(
            key, actor, WarmPoolStatus(size=size, ready=len(self._ready[key]), adopted=running)
        )

    def _offered(self, key: ActorKey, pod: _Pod) -> bool:
        """Whether a live pooled pod may be adopted: Running, not taken, and its runner
        asked to be (or started long enough ago: it may ask another replica)."""
        if pod.phase != "Running" or not pod.started or pod.uid in self._taken:
            return False
        _, started = self._started_at.setdefault(pod.uid, (key, self._clock()))
        return pod.uid in self._asking or self._clock() - started >= ASK_GRACE

    async def _adopted(self, key: ActorKey, pods: list[_Pod]) -> tuple[set[str], int]:
        """The uids of the listed pods the store says were adopted, and how many of them
        run their Session's process. An adopted pod still labelled pooled (a crash
        between its adoption's commit and its relabelling) is relabelled now; one
        labelled for a Session with no adoption (an older operator's crash, which
        relabelled first) is deleted."""
        listed = await self._control.adoptions_of_pods([pod.uid for pod in pods])
        rows = {row.pod_uid: row for row in listed}
        running = 0
        for pod in pods:
            row = rows.get(pod.uid)
            if row is None:
                if not pod.pooled and not pod.deleting:
                    log.warning("warm pool: pod %s was never adopted; deleting it", pod.name)
                    await self._discard(key[0], pod.name)
                continue
            self._adopted_names[row.session_id] = (row.epoch, row.pod_name, key)
            running += not (pod.ended or pod.deleting)
            if pod.pooled and pod.uid not in self._taken:
                try:
                    await self._writes.resume(row)
                except Exception:  # the others are not kept waiting: the next pass retries
                    log.exception("warm pool: labelling adopted pod %s failed", pod.name)
        return set(rows), running

    async def _claim_each(self, actor: Actor, live: list[_Pod], digest: str) -> None:
        """Creates the claim of each live pooled pod that lacks one (a crash between a
        pod and its claim; a pod waits, unscheduled, until its claim is there)."""
        namespace = actor.metadata.namespace or ""
        if not live:
            return
        claims = set(await self._kube.list_claims(namespace, f"{LABEL_POOL}={digest}"))
        for pod in live:
            if pod.name not in claims and not pod.started:
                await self._kube.create_claim(
                    namespace, build_pooled_claim(actor, pod.name, digest, pod.uid)
                )
            if pod.gated_claim is not None and self._gates is not None:
                # Made gated by a replica that is gone (else followed already).
                self._gates.follow(namespace, pod.name, pod.gated_claim)

    async def _refill(self, actor: Actor, digest: str) -> _Pod:
        """A new pooled pod and its claim (the pod first: the claim is owned by it)."""
        namespace = actor.metadata.namespace or ""
        name = f"{actor.metadata.name}-pool-{secrets.token_hex(4)}"
        if self._policies is not None:  # never a runner pod before its policies
            await self._policies.ensure(actor)
        await self._kube.ensure_service_account(namespace, build_service_account_spec(namespace))
        # The claim is made after its pod (owned by it): gated, the pod waits for it.
        gated = self._gates is not None and await self._gates.gated(actor.spec.computer)
        uid = await self._kube.create_pod(
            namespace,
            build_pooled_pod(actor, self._settings, name, digest, disk_bound=not gated),
        )
        await self._kube.create_claim(namespace, build_pooled_claim(actor, name, digest, uid))
        if gated and self._gates is not None:
            self._gates.follow(namespace, name, name)
        self._metrics.refills.inc()
        log.info("warm pool %s/%s: pod %s created", namespace, actor.metadata.name, name)
        return _Pod(name, uid, {LABEL_POOL: digest}, "Pending", False, False)

    async def _write_status(self, key: ActorKey, actor: Actor, status: WarmPoolStatus) -> None:
        if self._statuses.get(key) == status:
            return
        known = None if actor.status is None else actor.status.warm_pool
        if known != status:
            await self._kube.patch_resource_status(Actor, *key, ActorStatus(warm_pool=status))
        self._statuses[key] = status

    async def _discard(self, namespace: str, name: str) -> None:
        """Deletes a pod taken from the pool that runs nothing, and its claim. Its
        Session labels go first: its end must not be reported as its Session's."""
        unlabel = {LABEL_SESSION: None, LABEL_SESSION_ID: None, LABEL_EPOCH: None}
        with contextlib.suppress(KubeError):
            await self._kube.patch_pod(namespace, name, {"metadata": {"labels": unlabel}})
        await self._kube.delete_pod(namespace, name)
        await self._kube.delete_claim(namespace, name)

    def take(self, key: ActorKey) -> PooledPod | None:
        """A Running pooled pod of the Actor ``key`` for a Session to adopt (None: none
        is ready, and the pool is woken to refill), offered to no one else meanwhile."""
        ready = self._ready.get(key) or []
        if not ready:
            self._metrics.misses.inc()
            self._wake.set()
            return None
        pod = ready.pop()
        self._taken[pod.uid] = (key, pod)
        return PooledPod(namespace=key[0], name=pod.name, uid=pod.uid, claim=pod.name)

    def give_back(self, pod: PooledPod) -> None:
        """A pod taken and not adopted (untouched) is a candidate again."""
        key, taken = self._taken.pop(pod.uid)
        self._ready.setdefault(key, []).append(taken)

    def adopted(self, session_id: str, epoch: int, pod: PooledPod) -> None:
        """``pod`` runs the Session's process ``epoch`` (committed): named in its status,
        and the pool refilled."""
        key, _ = self._taken[pod.uid]
        self._asking.forget(pod.uid)
        self._adopted_names[session_id] = (epoch, pod.name, key)
        self._metrics.adopted.inc()
        self._wake.set()

    def unwritten(self, pod: PooledPod) -> None:
        """The adopted ``pod``'s relabelling failed: the next pass writes it."""
        self._taken.pop(pod.uid, None)

    def runner_pod(self, session: SessionView) -> str:
        """The name of the pod of the Session's live process: the pooled pod it
        adopted, else the one a cold start gives it (``StatusSync``'s ``runner_pod``)."""
        adopted = self._adopted_names.get(session.id)
        if adopted is not None and adopted[0] == session.process_epoch:
            return adopted[1]
        return pod_name(session.name, session.process_epoch)


def pool_size(actor: Actor) -> int:
    pool = actor.spec.warm_pool
    return 0 if pool is None else pool.size
