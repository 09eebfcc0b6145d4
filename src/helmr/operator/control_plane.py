"""The control plane's one process: store, state machine, API server,
process supervisor, status mirror and Actor recheck, started and stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Collection, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from helmr.control import ControlConfig, SessionView
from helmr.control.control import ApiControl
from helmr.control.operator_api import OperatorControl
from helmr.kube.client import Kube, load_config
from helmr.operator.at_once import AT_ONCE
from helmr.operator.cyclic_gc import settle_after_start
from helmr.operator.disks.workspaces import Disks
from helmr.operator.heap_trim import trim_heap_periodically
from helmr.operator.history_expiry import expire_history_periodically
from helmr.operator.leadership.leader import Leadership, elector
from helmr.operator.mirror.actor_acceptance import ActorRecheck
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.runners.adoption_answers import (
    AdoptedSessions,
    AdoptionAnswers,
    AskingPods,
)
from helmr.operator.runners.adoption_writes import AdoptionWrites
from helmr.operator.runners.disk_gates import disk_gates
from helmr.operator.runners.identity import RunnerPods, RunnerPodVerifier, runner_reviewer
from helmr.operator.runners.network_policies import RunnerPolicies, containment
from helmr.operator.runners.pod_reports import PodReports
from helmr.operator.runners.pod_runners import PodRunners
from helmr.operator.runners.pool_adoptions import PoolAdoptions
from helmr.operator.runners.pool_pods import PoolSettings
from helmr.operator.runners.recent_resources import RecentResources
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.runners.warm_pools import WarmPools
from helmr.operator.settings import Settings
from helmr.operator.telemetry import tracing
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.server import RUNNER_SERVER, SessionNames, app_runner, build_app, listen
from helmr.server.auth import Authenticator, Grant, StaticAuthenticator, User
from helmr.server.kube_auth import KubeAuthenticator
from helmr.store import Store

if TYPE_CHECKING:
    from helmr.kube.client import ApiClient

log = logging.getLogger(__name__)


def _authenticator(settings: Settings, kube_api: ApiClient) -> Authenticator:
    if settings.auth.startswith("static:"):
        token = settings.auth.removeprefix("static:")
        return StaticAuthenticator({token: Grant(user=User(name="static", groups=()))})
    return KubeAuthenticator(kube_api)


def _pool_settings(settings: Settings) -> PoolSettings:
    """What every pooled runner pod is built with, as a cold start's pod is."""
    return PoolSettings(
        runner_url=settings.runner_url,
        log_format=settings.log_format,
        node_selector=tuple(sorted(settings.runner_node_selector.items())),
        tolerations=settings.runner_tolerations,
        egress_proxy_url=settings.egress_proxy_url,
    )


def _end_process() -> None:
    """A deposed leader's end: kopf stops as on SIGTERM (its cleanup stops the
    control plane) and the pod's container restarts as a candidate."""
    os.kill(os.getpid(), signal.SIGTERM)


def _control_config(settings: Settings) -> ControlConfig:
    return ControlConfig(
        max_execution_losses=settings.max_execution_losses,
        stop_grace=settings.stop_grace,
        preparation_timeout=settings.preparation_timeout,
    )


class ControlPlane:
    def __init__(self, settings: Settings, store: Store) -> None:
        """Use :meth:`start`."""
        self.settings = settings
        self.store = store
        config = _control_config(settings)
        api = load_config()
        self.leadership = Leadership(store, elector(settings, api), on_deposed=_end_process)
        self.metrics = OperatorMetrics()
        store.observe = self.metrics.store_transaction
        # The leader's work (supervisor, status mirror, kopf's handlers) writes
        # fenced by its term, in the store's background lane; the APIs, served by
        # every replica, unfenced, never queued behind it.
        self.control = OperatorControl(store.background(), config, fence=self.leadership.fence)
        self.api_control = ApiControl(store, config)
        self.kube = Kube(api)
        self.runner_pods = RunnerPods()
        # An admitted Turn starts its Session's runner at once (a pooled one adopted
        # with no pass waited for), and wakes the supervisor.
        self.mirror = CustomResourceMirror(
            self.kube,
            admitted=self._turn_admitted,
            created=lambda session_id, resource, workspace: self.supervisor.recent.created(
                session_id, resource, workspace
            ),
            workspaces=self.api_control,
            api_turn_resources=settings.api_turn_resources,
            followed=lambda: self.leadership.leading,
        )
        # Each Turn's trace, when OTEL_EXPORTER_OTLP_ENDPOINT is set.
        self.traces = tracing.from_environ(os.environ)
        self.disks = Disks(
            self.control, self.kube, self.metrics, pass_interval=settings.reconcile_interval
        )
        # Fed by kopf's watch of runner pods too (a pod still gated after a restart).
        self.disk_gates = disk_gates(self.kube, settings, self.disks.save_support.binds_at_once)
        if self.traces is not None:
            self.disks.save_ended = self.traces.save_ended
        # Fed by kopf's watch of Actors too (helmr.operator.kopf.handlers.actor_network_policies).
        self.runner_policies = RunnerPolicies(self.kube, containment(settings))
        # Fed by kopf's watch of Actors too (helmr.operator.kopf.handlers.actor_seen).
        adoption_writes = AdoptionWrites(
            self.control, self.kube, pod_gone=lambda row: self.supervisor.pod_gone(row)
        )
        # The pooled pods whose runners asked this replica to be adopted: offered first.
        self.asking_pods = AskingPods()
        self.warm_pools = WarmPools(
            self.control,
            self.kube,
            adoption_writes,
            _pool_settings(settings),
            self.metrics.warm_pools,
            policies=self.runner_policies,
            asking=self.asking_pods,
            gates=self.disk_gates,
        )
        self.adopted_sessions = AdoptedSessions()
        adoptions = PoolAdoptions(
            self.control,
            self.kube,
            self.disks,
            self.warm_pools,
            adoption_writes,
            self.runner_pods,
            self.metrics.warm_pools,
            answered=self.adopted_sessions,
            # With watchNamespaces, the chart's Role in each may read its Secrets.
            read_secrets=bool(settings.watch_namespaces),
        )
        self.supervisor = Supervisor(
            self.control,
            self.kube,
            self.runner_pods,
            settings,
            self.metrics,
            runners=PodRunners(self.kube, self.disk_gates, self.runner_policies),
            disks=self.disks,
            pools=adoptions,
            recent=RecentResources(self.kube, self.warm_pools.watched),
        )
        # Fed by kopf's watch of Actors (helmr.operator.kopf.handlers.actor_seen).
        self.actor_recheck = ActorRecheck(self.kube, self.disks.save_support)
        # Fed by kopf's watch of runner pods (helmr.operator.kopf.handlers.runner_pod_event).
        self.pod_reports = PodReports(self.supervisor.pod_reported, at_once=AT_ONCE)
        self.status_sync = self._status_sync(settings)
        # Loaded before the API listens: a restart is asked at once by every runner.
        self.session_names = SessionNames(self.api_control)
        self.app = self._api(api)
        self._runner = app_runner(self.app)
        self._tasks: list[asyncio.Task[None]] = []

    def _status_sync(self, settings: Settings) -> StatusSync:
        return StatusSync(
            self.control,
            self.mirror,
            self.metrics,
            wake=self._store_changed,
            hooks=(self._sync_workspace,),
            turn_events=settings.turn_events,
            traces=self.traces,
            interval=settings.status_interval,
            runner_pod=self.warm_pools.runner_pod,
        )

    def _api(self, api: ApiClient) -> web.Application:
        """The public and runner APIs every replica serves."""
        # Runner pods' projected tokens, whatever authenticates the public API.
        runner_tokens = RunnerPodVerifier(
            runner_reviewer(api),
            self.runner_pods,
            self.session_names,
            adoption_of=self.api_control.adoption_of_pod,
        )
        return build_app(
            self.api_control,
            _authenticator(self.settings, api),
            runner_tokens,
            mirror=self.mirror,
            workspaces=self.disks,
            max_body=self.settings.max_request_bytes,
            collectors=[*self.metrics.collectors, self.leadership.gauge],
            leading=lambda: self.leadership.leading,
            refresh_metrics=self._count_sessions,
            runner_connected=self._runner_connected,
            traces=self.traces,
            session_names=self.session_names,
            adoptions=AdoptionAnswers(
                runner_tokens,
                self.api_control,
                self.kube,
                self.adopted_sessions,
                self.asking_pods,
            ),
        )

    @classmethod
    async def start(cls, settings: Settings) -> ControlPlane:
        if not settings.store_url:
            settings.store_path.parent.mkdir(parents=True, exist_ok=True)
        store = await Store.open(
            settings.store_url or settings.store_path, retention=settings.history_retention
        )
        plane = cls(settings, store)
        await plane._serve()
        return plane

    async def _serve(self) -> None:
        await self.session_names.load()
        await self._runner.setup()
        settle_after_start()
        host, port = self.settings.listen_host, self.settings.api_port
        await listen(self._runner, host, port)
        log.info("API listening on %s:%d", host, port)
        if self.settings.runner_port != port:
            # A port of its own, as the chart serves it: the runner API by a server
            # whose waiting long polls hold a fraction of aiohttp's requests.
            await self.app[RUNNER_SERVER].listen(host, self.settings.runner_port)
            log.info("runner API listening on %s:%d", host, self.settings.runner_port)
        # Which loop `kopf run` chose (uvloop when installed, as in the image).
        log.info("event loop: %s", type(asyncio.get_running_loop()).__module__)
        self._spawn(self.leadership.run(self._lead))
        self._spawn(trim_heap_periodically())

    async def _lead(self) -> None:
        """The leader's work, while this replica leads (helmr.operator.leadership.leader)."""
        async with asyncio.TaskGroup() as work:
            work.create_task(self.supervisor.run())
            work.create_task(self.disks.run())
            work.create_task(self.status_sync.run())
            work.create_task(expire_history_periodically(self.control))
            work.create_task(self.actor_recheck.run())
            work.create_task(self.warm_pools.run())

    async def stop(self) -> None:
        await self.pod_reports.stop()
        await self.disk_gates.close()
        await self.disks.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.app[RUNNER_SERVER].close()
        await self._runner.cleanup()
        if self.traces is not None:
            # Sends the last batch: blocking (up to the exporter's timeout), so off the loop.
            await asyncio.to_thread(self.traces.shutdown)
        await self.store.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(coro))

    async def _count_sessions(self) -> None:
        self.metrics.count_sessions(await self.api_control.session_counts())
        self.metrics.recovery_points(await self.api_control.recovery_points())

    def _store_changed(self, session_ids: Collection[str]) -> None:
        """Sessions changed in the store: the supervisor passes, and a Turn of theirs
        that ended has its save taken at once (``Disks.run``)."""
        self.supervisor.wake()
        self.disks.wake(session_ids)

    def _turn_admitted(self, session: SessionView) -> None:
        self.supervisor.wake()
        if self.leadership.leading:
            self.supervisor.admitted(session)

    def _runner_connected(self, session_id: str, epoch: int) -> None:
        self.metrics.timeline.runner_connected(session_id, epoch, datetime.now(UTC))

    async def _sync_workspace(self, session: SessionView) -> None:
        await self.disks.sync_status(session.namespace, session.workspace)
