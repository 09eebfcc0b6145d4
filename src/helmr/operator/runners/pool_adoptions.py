"""A new Session's first process adopts a pooled runner pod of its Actor (DESIGN 8).

The order is what makes it fast and crash-safe:

1. a Running pooled pod is taken from the pool (:meth:`WarmPools.take`: in memory,
   offered to no other Session meanwhile);
2. what the adoption stores is read: the Workspace (the one the API made at the
   Session's start, else made if missing; one whose settings override the Actor's
   disk settings takes no pooled claim), the disk's thresholds and save policy, and
   the Secrets the Session names, if any;
3. one store transaction commits the adoption (:func:`helmr.control.adoptions.adopt`):
   the process, prepared, the pod and claim as the Session's, the disk's thresholds.
   Its commit answers the pooled runner's adoption poll: the runner starts now;
4. then, off the runner's path, the pod and claim are relabelled and owned as the
   Session's (:mod:`.adoption_writes`).

Nothing is written to the pod before the commit, so a refused adoption gives the pod
back untouched, and a crash after it leaves a pod the store says is adopted, whose
relabelling the pool's next pass does: no pod is adopted twice (the store's key is
its uid), and no adopted Session waits on a write a crash lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from helmr.control import SessionView
from helmr.control.operator_api import OperatorControl
from helmr.control.views import limits_view
from helmr.kube.client import Kube
from helmr.operator.disks.manifests import PoolDisk
from helmr.operator.disks.workspaces import Disks
from helmr.operator.runners.adoption_answers import AdoptedSessions, Adopter
from helmr.operator.runners.adoption_writes import AdoptedObjects, AdoptionWrites
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.session_settings import SettingsUnavailable, settings_values
from helmr.operator.runners.warm_pools import WarmPools
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.resources import Actor, Session, Workspace
from helmr.resources.session_env import SessionEnv
from helmr.store import SessionLimits
from helmr.store.rows import AdoptionRow

log = logging.getLogger(__name__)


def takes_pooled_pod(
    actor: Actor, session: SessionView, env: SessionEnv, *, read_secrets: bool
) -> bool:
    """Whether the Session's start may take a pooled pod of ``actor``: its first
    process, of an Actor with a pool, and settings the adoption can carry (Secret
    keys only where the operator may read Secrets: else the kubelet resolves them,
    in a cold pod's spec)."""
    pool = actor.spec.warm_pool
    return (
        pool is not None
        and pool.size > 0
        and session.process_epoch == 0
        and (read_secrets or not env.names_secrets)
    )


class PoolAdoptions:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube,
        disks: Disks,
        pools: WarmPools,
        writes: AdoptionWrites,
        runner_pods: RunnerPods,
        metrics: WarmPoolMetrics,
        *,
        answered: AdoptedSessions | None = None,
        read_secrets: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``answered``: where the pods' adoption answers find the Session as held here
        (this replica's ``AdoptionAnswers``)."""
        self._control = control
        self._answered = answered or AdoptedSessions()
        self._kube = kube
        self._disks = disks
        self._pools = pools
        self._writes = writes
        self._runner_pods = runner_pods
        self._metrics = metrics
        # Whether the operator may read Secrets in the namespaces it serves (a Role
        # in each: the chart's watchNamespaces), so a Session naming some adopts too.
        self._read_secrets = read_secrets
        self._clock = clock

    async def adopt(
        self,
        session: SessionView,
        owner: Session,
        actor: Actor,
        limits: SessionLimits | None = None,
        workspace: Workspace | None = None,
    ) -> bool:
        """The Session's first process adopts a pooled pod of ``actor`` (True), or
        starts cold (False: none is ready, or its Workspace or settings cannot take one).
        ``limits``: the Session's when it has none yet, resolved by the adoption;
        ``workspace``: its Workspace as the API made it at its start, if it did."""
        env = SessionEnv.of(owner.spec.env, owner.spec.env_from)
        if not takes_pooled_pod(actor, session, env, read_secrets=self._read_secrets):
            return False
        pod = self._pools.take((session.namespace, session.actor))
        if pod is None:
            return False
        started = self._clock()
        try:
            disk = await self._disk(session, actor, env, workspace)
        except BaseException:
            self._pools.give_back(pod)  # untouched
            raise
        if disk is None:
            self._pools.give_back(pod)
            return False
        epoch = session.process_epoch + 1
        resolved = (
            session
            if limits is None
            else session.model_copy(update={"limits": limits_view(limits)})
        )
        self._answered.keep(pod.uid, Adopter(resolved, owner))  # the commit answers the pod
        # Raising, the write may have committed all the same (a cancelled wait): the
        # pod is not given back, the pool's next listing says whether it was adopted.
        if not await self._control.adopt(session.id, epoch, pod, disk.disk, limits):
            self._answered.take(pod.uid)
            self._pools.give_back(pod)
            return False
        self._runner_pods.created(session.id, epoch, pod.uid)
        self._metrics.adoption_seconds.observe(self._clock() - started)
        log.info("session %s: adopted pod %s", session.id, pod.name)
        row = AdoptionRow(
            pod_uid=pod.uid,
            namespace=pod.namespace,
            pod_name=pod.name,
            claim=pod.claim,
            session_id=session.id,
            epoch=epoch,
        )
        objects = AdoptedObjects(row, session.name, owner.owner_reference().uid, disk.workspace)
        self._pools.adopted(session.id, epoch, pod)
        try:
            await self._writes.write(objects)
        except Exception:  # adopted all the same: the pool's next pass writes them
            log.exception("session %s: relabelling adopted pod %s failed", session.id, pod.name)
            self._pools.unwritten(pod)
        return True

    async def _disk(
        self, session: SessionView, actor: Actor, env: SessionEnv, workspace: Workspace | None
    ) -> PoolDisk | None:
        """The pooled claim as the Session's Workspace's disk; None when the Workspace
        overrides the Actor's disk settings, or a Secret the Session names is missing
        (checked here: its runner would get nothing; a cold pod says it plainly)."""
        if env.names_secrets:
            try:
                await settings_values(self._kube, session.namespace, env)
            except SettingsUnavailable as exc:
                log.info("session %s starts cold: %s", session.id, exc)
                return None
        return await self._disks.pool_disk(session.namespace, session.workspace, actor, workspace)
