"""Keeps runner processes in step with the state machine: start, stop, notice loss.

The store says which sessions need a process and which processes must stop;
this module turns that into runners, through a :class:`~.backend.RunnerBackend`
(pods: :mod:`.pod_runners`). It never keeps state of its own that a
restart could lose: epochs come from the store, pods are found by label, and
deadlines are computed from stored timestamps by Control.

Invariant: never two live runner pods for one session. A new epoch is
started only once every older pod of the session is gone from the apiserver,
which the kubelet confirms only after its containers have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial

from helmr import logs
from helmr.control import ProcessStop, SessionView
from helmr.control.operator_api import OperatorControl
from helmr.errors import NotFound
from helmr.kube.client import Kube, namespace_terminating
from helmr.operator.at_once import AT_ONCE, each_at_once
from helmr.operator.disks.backend import DiskBackend, DiskInTheWay, RestoreFailed
from helmr.operator.disks.manifests import PreparedDisk
from helmr.operator.disks.workspaces import Disks
from helmr.operator.runners import pods
from helmr.operator.runners.backend import (
    ResourceReader,
    RunnerBackend,
    RunnerRef,
    StartRefused,
)
from helmr.operator.runners.disk_gates import disk_gates
from helmr.operator.runners.fork_env import runner_env
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.limits import effective_limits
from helmr.operator.runners.pod_reports import PodReport
from helmr.operator.runners.pod_runners import PodRunners
from helmr.operator.runners.pool_adoptions import PoolAdoptions
from helmr.operator.runners.recent_resources import RecentResources
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Actor, Session
from helmr.resources.session_env import SessionEnv
from helmr.states import FailureReason
from helmr.store import utc_now
from helmr.store.rows import AdoptionRow

log = logging.getLogger(__name__)


def _cluster(kube: Kube | None) -> Kube:
    if kube is None:
        raise ValueError("without a cluster, give the runners, disks and resources backends")
    return kube


class Supervisor:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube | None,
        runner_pods: RunnerPods,
        settings: Settings,
        metrics: OperatorMetrics,
        clock: Callable[[], datetime] = utc_now,
        runners: RunnerBackend | None = None,
        disks: DiskBackend | None = None,
        resources: ResourceReader | None = None,
        pools: PoolAdoptions | None = None,
        recent: RecentResources | None = None,
    ) -> None:
        """``runners``: where runner processes run (a pod each unless given);
        ``disks``: where their Computer disks are kept (claims unless given);
        ``resources``: where Actors and Sessions are read (``kube`` unless given).
        ``kube`` is None only with all three given: no cluster at all (``helmr dev``).
        ``pools``: adoptions from the Actors' warm pools, whose pods new Sessions
        adopt (none: every start is cold); ``recent``: the Session resources (and
        Workspaces) this process's API created and the Actors watched, which a start
        need not read (nor make)."""
        self.control = control
        self.clock = clock
        self.metrics = metrics
        self.resources: ResourceReader = resources or _cluster(kube)
        self.recent = recent or RecentResources(self.resources)
        self.runner_pods = runner_pods
        self.runners: RunnerBackend = runners or PodRunners(
            _cluster(kube), disk_gates(_cluster(kube), settings)
        )
        self.settings = settings
        self.disks: DiskBackend = disks or Disks(control, _cluster(kube), metrics)
        self.pools = pools
        self._wake = asyncio.Event()
        # Sessions already logged as waiting for their Actor (log once, not every pass).
        self._waiting_for_actor: set[str] = set()
        # Runners of live processes that were being removed when this process
        # started, or adopted and not yet labelled as such, by (session, epoch):
        # followed to their end (see recover).
        self._ending: dict[tuple[str, int], RunnerRef] = {}
        # Sessions whose start is under way (a pass's, or an admission's): one at a time.
        self._starting: set[str] = set()
        self._admissions: set[asyncio.Task[None]] = set()
        # Admissions' starts under way at once: a few, as a pass's (a burst of new
        # Sessions would otherwise queue all their calls behind the Kubernetes threads).
        self._admitting = asyncio.Semaphore(AT_ONCE)

    def wake(self) -> None:
        """Asks for a pass now (a turn was admitted, a pod ended)."""
        self._wake.set()

    def admitted(self, session: SessionView) -> None:
        """A Turn of ``session`` (as its admission left it) was admitted: a Session that
        needs a runner starts one now, not a pass later (a pooled runner is answered
        as soon as its adoption commits). The leader's only: it runs the passes too."""
        if session.process_live:
            return
        task = asyncio.create_task(self._start_admitted(session.id))
        self._admissions.add(task)
        task.add_done_callback(self._admissions.discard)

    async def _start_admitted(self, session_id: str) -> None:
        async with self._admitting:
            await self._isolated(session_id, self.start(session_id))

    async def run(self) -> None:
        try:
            await self.recover()
            while True:
                try:
                    await self.reconcile()
                except Exception:
                    # One bad pass (apiserver hiccup) must not end supervision.
                    log.exception("supervisor pass failed; retrying")
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a
                # cancellation that comes as the wake-up does, and stopping would wait
                # for ever.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.reconcile_interval):
                        await self._wake.wait()
                self._wake.clear()
        finally:  # no longer leading: the admissions' starts are the next leader's
            for task in self._admissions:
                task.cancel()

    async def recover(self) -> None:
        """After a restart: a live process whose pod is gone was lost meanwhile.

        One whose pod is being deleted is followed by the passes until the pod is
        gone (:meth:`_follow_ending`): its DELETED event may come after this listing
        but before kopf's watch of pods lists them, and then nothing else would ever
        report the loss (the Session would wait for its runner forever)."""
        # With namespaced RBAC (watched namespaces given) pods are listed per namespace.
        scopes: tuple[str | None, ...] = self.settings.watch_namespaces or (None,)
        existing = {
            (runner.session_id, runner.epoch): runner
            for scope in scopes
            for runner in await self.runners.runners(scope)
        }
        for session in await self.control.live_processes():
            process = (session.id, session.process_epoch)
            pod = existing.get(process) or await self._adopted_unlabelled(session)
            if pod is None:
                log.info("session %s: process %d vanished", session.id, session.process_epoch)
                await self.control.execution_lost(
                    session.id,
                    session.process_epoch,
                    saves_unavailable=await self.disks.why_unsaved(session),
                )
            elif pod.deleting or process not in existing:
                self._ending[process] = pod

    async def _adopted_unlabelled(self, session: SessionView) -> RunnerRef | None:
        """The pod a live process adopted from a warm pool whose labels a crash kept
        from being written (``adoption_writes``): followed by name until the pool's
        pass labels it (its events report it then) or it is gone (lost)."""
        adoption = await self._adoption(session.id, session.process_epoch)
        if adoption is None:
            return None
        if (await self.runners.state(adoption.namespace, adoption.pod_name)).gone:
            return None
        return RunnerRef(
            adoption.namespace, adoption.pod_name, session.id, adoption.epoch, deleting=False
        )

    async def reconcile(self) -> None:
        now = self.clock()
        await self._follow_ending()
        await self._each_at_once(
            await self.control.sessions_without_limits(),
            lambda session: self.resolve_limits(session, now),
        )
        expiry = await self.control.next_idle_expiry()
        if expiry is not None and expiry <= now:  # closing asks their processes to stop
            await self.control.expire_idle(now)
        stops: list[ProcessStop] = []
        deadline = await self.control.next_deadline()
        if deadline is not None and deadline <= now:  # a read first: most passes have none due
            stops += await self.control.expire_deadlines(now)
        # The deadlines just expired are stops asked for too: each pod is deleted once.
        stops += await self.control.processes_to_stop()
        for stop in {(stop.session_id, stop.epoch): stop for stop in stops}.values():
            await self._isolated(stop.session_id, self.stop(stop))
        for session in await self.control.overdue_preparations(now):
            await self._isolated(session.id, self.preparation_overdue(session))
        waiting = await self.control.sessions_needing_runner(now)
        self.metrics.sessions_waiting.set(len(waiting))
        under_pressure = await self.control.sessions_under_storage_pressure()
        self.metrics.storage_pressure.sessions.set(under_pressure)
        await self._each_at_once(waiting, lambda session: self.start(session.id))
        await self.disks.reconcile()

    async def _follow_ending(self) -> None:
        """The pods :meth:`recover` found being deleted: one that is gone now reports
        its process's execution lost, as its DELETED event would have (a second
        report of it, from kopf's watch, is ignored by Control). A pod read each,
        a few at once, as the pass's other per-Session steps."""

        async def followed(session_id: str, epoch: int, pod: RunnerRef) -> None:
            await self._isolated(session_id, self._ended(session_id, epoch, pod))

        await each_at_once(
            AT_ONCE,
            (
                partial(followed, sid, epoch, pod)
                for (sid, epoch), pod in list(self._ending.items())
            ),
        )

    async def _ended(self, session_id: str, epoch: int, pod: RunnerRef) -> None:
        if not (await self.runners.state(pod.namespace, pod.name)).gone:
            return
        del self._ending[(session_id, epoch)]
        await self.pod_reported(PodReport.of(pod, deleted=True, started=False, outcome="lost"))

    async def _each_at_once(
        self, sessions: list[SessionView], step: Callable[[SessionView], Awaitable[None]]
    ) -> None:
        """``step`` of each Session (isolated), a few Sessions at a time. Each step is
        apiserver round trips (a start: its disk, its service account, its pod;
        reading limits: its Actor and its resource). One after another, Sessions opened
        at once waited for their last runner pod, or for their limits to be read, a
        round trip per Session before them (benchmarks/bench_scale.py kwok,
        benchmarks/bench_operator_memory.py)."""

        async def isolated(session: SessionView) -> None:
            await self._isolated(session.id, step(session))

        await each_at_once(AT_ONCE, (partial(isolated, session) for session in sessions))

    async def _isolated(self, session_id: str, step: Awaitable[None]) -> None:
        """Runs one session's step: its failure is logged and retried on the next
        pass, and does not keep the other sessions waiting. A namespace being
        deleted ends the session instead: nothing can be created there again."""
        try:
            with logs.bound(session=session_id):
                await step
        except Exception as exc:
            if namespace_terminating(exc) or (isinstance(exc, StartRefused) and exc.gone):
                log.info("session %s: its namespace is being deleted; it fails", session_id)
                await self.control.fail_session(session_id, FailureReason.NAMESPACE_TERMINATING)
                return
            log.exception("session %s: supervisor step failed; retrying", session_id)

    async def resolve_limits(self, session: SessionView, now: datetime) -> None:
        """Reads the Session's Actor once, when it opened, and stores its limits."""
        read, owner = await asyncio.gather(
            self.resources.get_resource(Actor, session.namespace, session.actor),
            self.resources.get_resource(Session, session.namespace, session.name),
        )
        actor = await self._actor_found(session, read, now)
        if actor is None:
            return
        # An API Session's resource may not be created yet: it has no overrides.
        await self.control.resolve_limits(session.id, effective_limits(owner, actor))

    async def _actor_found(
        self, session: SessionView, actor: Actor | None, now: datetime
    ) -> Actor | None:
        """``actor``, the Session's Actor as read; a Session whose Actor is still
        missing a grace period after it opened fails (``actor_not_found: <name>``):
        the Actor may be applied just after the Session, but not never."""
        if actor is not None:
            self._waiting_for_actor.discard(session.id)
            return actor
        if now - session.created_at >= self.settings.actor_grace:
            log.warning("session %s: Actor %s not found; it fails", session.id, session.actor)
            await self.control.fail_session(
                session.id, FailureReason.ACTOR_NOT_FOUND.because(session.actor)
            )
        elif session.id not in self._waiting_for_actor:
            log.warning("session %s waits for Actor %s", session.id, session.actor)
            self._waiting_for_actor.add(session.id)
        return None

    async def _leftovers(self, session: SessionView) -> list[RunnerRef]:
        """The Session's runners that are still there. A Session that never
        started a process has none: its epoch is raised before each runner is made."""
        if session.process_epoch == 0:
            return []
        return await self.runners.runners(session.namespace, session.id)

    async def preparation_overdue(self, session: SessionView) -> None:
        """A process not running by its preparation deadline has failed to prepare,
        unless its pod says it has started (an event missed, say while the operator
        was down)."""
        name = await self._runner_name(session.id, session.name, session.process_epoch)
        state = await self.runners.state(session.namespace, name)
        if state.started:
            await self.control.process_prepared(session.id, session.process_epoch)
            return
        detail = state.pending
        seconds = self.settings.preparation_timeout.total_seconds()
        await self.fail_preparation(
            session, session.process_epoch, f"not running after {seconds:g}s: {detail}"
        )

    async def fail_preparation(self, session: SessionView, epoch: int, detail: str) -> None:
        """Records a failed preparation and removes its pod (if there is one)."""
        result = await self.control.preparation_failed(session.id, epoch, detail)
        if result.outcome == "ignored":
            return
        log.warning("session %s process %d: preparation failed: %s", session.id, epoch, detail)
        self.metrics.processes_ended.labels(result.outcome).inc()
        name = await self._runner_name(session.id, session.name, epoch)
        await self.runners.remove(session.namespace, name)

    async def pod_reported(self, report: PodReport) -> None:
        """A runner pod that ended tells Control how: exit code or execution loss.
        One whose container started is prepared; one that cannot start (its image
        cannot be pulled, its container cannot be configured) failed its preparation."""
        session_id, epoch = report.session_id, report.epoch
        logs.bind(namespace=report.namespace, session=session_id, epoch=epoch)
        try:
            # Read once: a failed preparation below needs the Session too.
            session = await self.control.get_session(session_id)
        except NotFound:
            # Its Session's history was lost with the store: nothing will talk to it.
            if not report.deleted:
                log.warning(
                    "runner pod %s of session %s, which the store lacks: deleting it",
                    report.name,
                    session_id,
                )
                await self.runners.remove(report.namespace, report.name)
            return
        if not report.deleted:
            if report.started:
                await self.control.process_prepared(session_id, epoch)
            if report.failure is not None:
                await self.fail_preparation(session, epoch, report.failure)
                self.wake()
                return
        if report.outcome == "running" and not report.deleted:
            return
        if report.outcome == "exited" and report.exit_code is not None:
            result = await self.control.process_exited(session_id, epoch, report.exit_code)
        else:
            # Deleted before it ended (eviction, node loss, someone's kubectl
            # delete), or evicted: the execution was lost, not a process failure.
            # A stop the supervisor asked for is recognised by Control as a stop.
            result = await self.control.execution_lost(
                session_id, epoch, saves_unavailable=await self.disks.why_unsaved(session)
            )
        if result.outcome != "ignored":
            self.metrics.processes_ended.labels(result.outcome).inc()
            log.info("session %s process %d: %s", session_id, epoch, result.outcome)
        if not report.deleted:
            await self.runners.remove(report.namespace, report.name)
        self.wake()

    async def stop(self, stop: ProcessStop) -> None:
        session = await self.control.get_session(stop.session_id)
        log.info("session %s: stopping process %d (%s)", session.id, stop.epoch, stop.reason)
        name = await self._runner_name(session.id, session.name, stop.epoch)
        await self.runners.remove(session.namespace, name)

    async def _runner_name(self, session_id: str, session_name: str, epoch: int) -> str:
        """The name of the runner of the Session's process ``epoch``: the pooled pod it
        adopted, else the one the backend gives a cold start."""
        adopted = await self._adoption(session_id, epoch)
        return self.runners.name(session_name, epoch) if adopted is None else adopted.pod_name

    async def _adoption(self, session_id: str, epoch: int) -> AdoptionRow | None:
        """The pooled pod the Session's process ``epoch`` adopted (only a first
        process adopts one)."""
        return None if epoch != 1 else await self.control.adopted_pod(session_id, epoch)

    async def pod_gone(self, adoption: AdoptionRow) -> None:
        """An adopted pod was found gone before it was labelled: no event of it will
        report its process's end, so it is reported here (``adoption_writes``)."""
        runner = RunnerRef(
            adoption.namespace,
            adoption.pod_name,
            adoption.session_id,
            adoption.epoch,
            deleting=False,
        )
        await self.pod_reported(PodReport.of(runner, deleted=True, started=False, outcome="lost"))

    async def start(self, session_id: str) -> None:
        """Starts the Session's next runner if it needs one; nothing if its start is
        under way already (a pass's and an admission's may come together). The
        Session is read here, under that guard: a view read before another start of
        it ended (a pass's listing, as an admission's start commits) would start it
        twice, the second refused as the first's process is live, its claim made
        again. Held, backing off, or started since, it needs none."""
        if session_id in self._starting:
            return
        self._starting.add(session_id)
        try:
            session = await self.control.session_needing_runner(session_id, self.clock())
            if session is not None:
                await self._start(session)
        finally:
            self._starting.discard(session_id)

    async def _start(self, session: SessionView) -> None:
        # The three reads go out together: each may be an apiserver round trip (the
        # Session and Actor resources are not read when this process holds them).
        leftovers, (owner, workspace), actor = await asyncio.gather(
            self._leftovers(session), self.recent.session(session), self.recent.actor(session)
        )
        if leftovers:
            # An older process is still physically there: remove it and come
            # back once the apiserver says it is gone.
            for runner in leftovers:
                if not runner.deleting:
                    await self.runners.remove(runner.namespace, runner.name)
            return
        if owner is None:
            # Its Session resource was deleted while no operator watched (the
            # delete handler is best-effort: a finalizer would wedge namespace
            # deletion whenever the operator is down). Deleting it cancels it.
            log.warning("session %s: its Session resource is gone; cancelling", session.id)
            await self.control.cancel(session.id)
            return
        actor = await self._actor_found(session, actor, self.clock())
        if actor is None:
            return
        # Opened since the pass's resolve_limits: resolved now, by a pooled start's
        # adoption in its own transaction (one write fewer on its path), else here.
        limits = None if session.limits is not None else effective_limits(owner, actor)
        if self.pools is not None and await self.pools.adopt(
            session, owner, actor, limits, workspace
        ):
            self.metrics.processes_started.inc()
            return
        if limits is not None:
            session = await self.control.resolve_limits(session.id, limits)
        try:
            disk = await self.disks.prepare(session, actor)
        except RestoreFailed as exc:
            log.warning("session %s: %s; the session fails", session.id, exc)
            await self.control.fail_session(session.id, FailureReason.RESTORE_FAILED.because(exc))
            self.metrics.restores_failed.inc()
            return
        except DiskInTheWay as exc:
            log.info("session %s: %s", session.id, exc)  # the next pass prepares it again
            return
        env = await runner_env(self.resources, owner)
        epoch = await self.control.process_started(session.id)
        try:
            uid = await self.runners.start(
                self._runner_spec(session, owner, actor, epoch, disk, env)
            )
        except StartRefused as exc:
            # The process is registered: without its runner nothing would ever end it.
            await self.fail_preparation(session, epoch, str(exc))
            if exc.gone:
                raise
            return
        # Only this pod's token is the identity of the session's new epoch.
        self.runner_pods.created(session.id, epoch, uid)
        self.metrics.processes_started.inc()
        self.metrics.timeline.pod_created(session.id, epoch, self.clock())
        log.info("session %s: started process %d", session.id, epoch)

    def _runner_spec(
        self,
        session: SessionView,
        owner: Session,
        actor: Actor,
        epoch: int,
        disk: PreparedDisk,
        env: SessionEnv,
    ) -> pods.RunnerSpec:
        """What the runner of ``session``'s process ``epoch`` needs, on ``disk``, with
        the Session's settings ``env`` (:func:`runner_env`)."""
        assert session.limits is not None  # resolved before any process starts
        return pods.RunnerSpec(
            namespace=session.namespace,
            session_name=session.name,
            session_uid=owner.owner_reference().uid,
            session_id=session.id,
            epoch=epoch,
            actor=actor,
            runner_url=self.settings.runner_url,
            claim_name=disk.claim,
            disk_usage=disk.usage,
            disk_bound=disk.bound,
            idle_timeout_seconds=session.limits.idle_timeout_seconds,
            log_format=self.settings.log_format,
            node_selector=self.settings.runner_node_selector,
            tolerations=self.settings.runner_tolerations,
            session_env=env,
            egress_proxy_url=self.settings.egress_proxy_url,
        )
