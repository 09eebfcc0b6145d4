"""Warm pools: runner pods kept Running per Actor, adopted by new Sessions (DESIGN 8).

The leader keeps ``spec.warmPool.size`` pooled pods (:mod:`.pool_pods`) of each Actor
that asks for some, each with a fresh claim of its own, and deletes pooled pods its
Actor's spec no longer makes (their hash label differs) or that ended. Adopted pods
are never touched here: they are their Session's, as a cold start's pod is.

A new Session's first start (:meth:`WarmPools.adopt`, from the supervisor) takes a
pooled pod that is Running: the pod is relabelled and owned as its Session's runner
pod of the next epoch, its claim as the Workspace's first disk, then one store
transaction (``helmr.control.adoptions``) records the adoption, which answers the
pod's adoption long poll. The relabelling comes first, so a crash between leaves a
pod labelled for a Session whose store never adopted it: the next pass deletes it
(an orphan), and the Session starts on another. Nothing is in memory that a restart
needs: pods are found by label, adoptions in the store.
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
from helmr.operator.disks.workspaces import Disks
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.network_policies import RunnerPolicies
from helmr.operator.runners.pods import build_service_account_spec, pod_name
from helmr.operator.runners.pool_pods import (
    PoolSettings,
    adopted_claim_patch,
    adopted_pod_patch,
    build_pooled_claim,
    build_pooled_pod,
    pool_hash,
)
from helmr.operator.runners.preparation import container_started
from helmr.operator.runners.session_settings import SettingsUnavailable, settings_values
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.resources import Actor, ActorStatus, Session, WarmPoolStatus
from helmr.resources.session_env import SessionEnv

log = logging.getLogger(__name__)

POOL_INTERVAL = 1.0
"""Seconds between two passes over the pools (sooner after an adoption or an Actor change)."""

ActorKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Pod:
    name: str
    uid: str
    labels: dict[str, str]
    phase: str
    started: bool
    deleting: bool

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
        )

    @property
    def pooled(self) -> bool:
        return LABEL_POOL in self.labels

    @property
    def ended(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def takes_pooled_pod(
    actor: Actor, session: SessionView, env: SessionEnv, *, read_secrets: bool
) -> bool:
    """Whether the Session's start may take a pooled pod of ``actor``: its first
    process, of an Actor with a pool, and settings the adoption can carry (Secret
    keys only where the operator may read Secrets: else the kubelet resolves them,
    in a cold pod's spec)."""
    pool = actor.spec.warm_pool
    names_secrets = bool(env.env_from) or any(var.value_from is not None for var in env.env)
    return (
        pool is not None
        and pool.size > 0
        and session.process_epoch == 0
        and (read_secrets or not names_secrets)
    )


class WarmPools:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube,
        disks: Disks,
        runner_pods: RunnerPods,
        settings: PoolSettings,
        metrics: WarmPoolMetrics,
        *,
        policies: RunnerPolicies | None = None,
        read_secrets: bool = False,
        interval: float = POOL_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._control = control
        self._kube = kube
        self._disks = disks
        self._runner_pods = runner_pods
        self._settings = settings
        self._metrics = metrics
        self._policies = policies
        # Whether the operator may read Secrets in the namespaces it serves (a Role
        # in each: the chart's watchNamespaces), so a Session naming some adopts too.
        self._read_secrets = read_secrets
        self._interval = interval
        self._clock = clock
        self._wake = asyncio.Event()
        # The Actors with a pool, or that may have pods of one (each Actor seen when
        # this process started, until a pass finds none), as last seen (kopf's watch):
        # the others cost no listing.
        self._actors: dict[ActorKey, Actor] = {}
        # Per Actor, the pooled pods Running at the last pass, newest last, not yet taken.
        self._ready: dict[ActorKey, list[_Pod]] = {}
        # Pods being adopted now by this process (relabelled, not yet committed).
        self._adopting: set[str] = set()
        # Pods this process took from each Actor's pool, by uid: never offered again,
        # even by a listing made before their relabelling (forgotten once unlisted).
        self._taken: dict[str, ActorKey] = {}
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
        for uid in [uid for uid, owner in self._taken.items() if owner == key]:
            if uid not in listed:
                del self._taken[uid]
        names = {pod.name for pod in pods}
        for session_id, (_, name, owner) in list(self._adopted_names.items()):
            if owner == key and name not in names:
                del self._adopted_names[session_id]
        adopted = await self._adopted(key, [pod for pod in pods if not pod.pooled])
        digest = pool_hash(actor, self._settings)
        live: list[_Pod] = []
        for pod in (pod for pod in pods if pod.pooled and not pod.deleting):
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
        self._ready[key] = [
            pod
            for pod in live
            if pod.phase == "Running" and pod.started and pod.uid not in self._taken
        ]
        await self._write_status(
            key, actor, WarmPoolStatus(size=size, ready=len(self._ready[key]), adopted=adopted)
        )

    async def _adopted(self, key: ActorKey, taken: list[_Pod]) -> int:
        """How many of the pods taken from the pool run their Session's process; one
        labelled for a Session whose adoption was never committed (a crash between
        its relabelling and its transaction, or a transaction refused) is deleted."""
        rows = await self._control.adoptions_of_pods([pod.uid for pod in taken])
        known = {row.pod_uid for row in rows}
        for row in rows:
            self._adopted_names[row.session_id] = (row.epoch, row.pod_name, key)
        running = 0
        for pod in taken:
            if pod.uid in known:
                running += not (pod.ended or pod.deleting)
            elif pod.uid not in self._adopting and not pod.deleting:
                log.warning("warm pool: pod %s was never adopted; deleting it", pod.name)
                await self._discard(key[0], pod.name)
        return running

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

    async def _refill(self, actor: Actor, digest: str) -> _Pod:
        """A new pooled pod and its claim (the pod first: the claim is owned by it)."""
        namespace = actor.metadata.namespace or ""
        name = f"{actor.metadata.name}-pool-{secrets.token_hex(4)}"
        if self._policies is not None:  # never a runner pod before its policies
            await self._policies.ensure(actor)
        await self._kube.ensure_service_account(namespace, build_service_account_spec(namespace))
        uid = await self._kube.create_pod(
            namespace, build_pooled_pod(actor, self._settings, name, digest)
        )
        await self._kube.create_claim(namespace, build_pooled_claim(actor, name, digest, uid))
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

    async def adopt(self, session: SessionView, owner: Session, actor: Actor) -> bool:
        """The Session's first process adopts a pooled pod of ``actor`` (True), or
        starts cold (False: none is ready, or its Workspace or settings cannot take one)."""
        key = (session.namespace, session.actor)
        env = SessionEnv.of(owner.spec.env, owner.spec.env_from)
        if not takes_pooled_pod(actor, session, env, read_secrets=self._read_secrets):
            return False
        ready = self._ready.get(key) or []
        if not ready:
            self._metrics.misses.inc()
            self._wake.set()
            return False
        started = self._clock()
        # Taken before any wait: Sessions of the Actor start a few at once.
        pod = ready.pop()
        self._taken[pod.uid] = key
        if not await self._adopt(session, owner, actor, env, pod):
            return False
        self._metrics.adopted.inc()
        self._metrics.adoption_seconds.observe(self._clock() - started)
        self._wake.set()  # refill
        log.info("session %s: adopted pod %s", session.id, pod.name)
        return True

    def _give_back(self, key: ActorKey, pod: _Pod) -> None:
        """A pod taken and left untouched is a candidate again."""
        del self._taken[pod.uid]
        self._ready.setdefault(key, []).append(pod)

    async def _adopt(
        self, session: SessionView, owner: Session, actor: Actor, env: SessionEnv, pod: _Pod
    ) -> bool:
        """Adopts ``pod`` (taken); False when the Session cannot take it (the pod is
        given back), or the store refused (the pod is deleted)."""
        key = (session.namespace, session.actor)
        try:
            # Its Secrets are there (its runner gets them when answered), and its
            # Workspace takes the Actor's disk settings.
            await settings_values(self._kube, session.namespace, env)
            workspace = await self._disks.pool_workspace(
                session.namespace, session.workspace, actor
            )
        except SettingsUnavailable as exc:
            log.info("session %s starts cold: %s", session.id, exc)
            workspace = None
        except BaseException:
            self._give_back(key, pod)  # untouched yet
            raise
        if workspace is None:
            self._give_back(key, pod)
            return False
        epoch = session.process_epoch + 1
        self._adopting.add(pod.uid)
        try:
            uid = owner.owner_reference().uid
            await self._kube.patch_pod(
                session.namespace, pod.name, adopted_pod_patch(session.name, uid, session.id, epoch)
            )
            await self._kube.patch_claim(
                session.namespace, pod.name, adopted_claim_patch(workspace)
            )
            pooled = PooledPod(
                namespace=session.namespace, name=pod.name, uid=pod.uid, claim=pod.name
            )
            if not await self._control.adopt(session.id, epoch, pooled):
                log.warning("session %s: pod %s not adopted; deleting it", session.id, pod.name)
                await self._discard(session.namespace, pod.name)
                return False
        finally:
            self._adopting.discard(pod.uid)
        self._runner_pods.created(session.id, epoch, pod.uid)
        self._adopted_names[session.id] = (epoch, pod.name, key)
        return True

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
