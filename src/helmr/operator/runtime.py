"""The control plane's one process: store, state machine, API server,
process supervisor and status mirror, started and stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from kubernetes.client import ApiClient

from helmr.control import Control, ControlConfig
from helmr.events import EventKind
from helmr.operator import pods
from helmr.operator.kube import Kube, load_config
from helmr.operator.metrics import OperatorMetrics
from helmr.operator.mirror import CustomResourceMirror
from helmr.operator.settings import Settings
from helmr.operator.supervisor import Supervisor
from helmr.operator.tokens import RunnerTokens
from helmr.server import build_app
from helmr.server.auth import Authenticator, Grant, StaticAuthenticator, User
from helmr.server.kube_auth import KubeAuthenticator
from helmr.store import Store

log = logging.getLogger(__name__)

_TERMINAL = {
    EventKind.TURN_COMPLETED,
    EventKind.TURN_FAILED,
    EventKind.TURN_INTERRUPTED,
    EventKind.TURN_CANCELLED,
}
# Kinds worth a Kubernetes Event on the CR (`kubectl describe`); output and
# message facts stay in the timeline only.
_K8S_EVENT_KINDS = _TERMINAL | {
    EventKind.SESSION_INTERRUPT,
    EventKind.SESSION_RESUME,
    EventKind.SESSION_CLOSED,
    EventKind.SESSION_PROCESS_FAILED,
    EventKind.SESSION_EXECUTION_LOST,
}
_WARNINGS = {
    EventKind.TURN_FAILED,
    EventKind.SESSION_PROCESS_FAILED,
    EventKind.SESSION_EXECUTION_LOST,
}


def _authenticator(settings: Settings, kube_api: ApiClient) -> Authenticator:
    if settings.auth.startswith("static:"):
        token = settings.auth.removeprefix("static:")
        return StaticAuthenticator({token: Grant(user=User(name="static", groups=()))})
    return KubeAuthenticator(kube_api)


class Runtime:
    def __init__(self, settings: Settings, store: Store) -> None:
        """Use :meth:`start`."""
        self.settings = settings
        self.store = store
        self.control = Control(
            store,
            ControlConfig(
                max_execution_losses=settings.max_execution_losses,
                stop_grace=settings.stop_grace,
            ),
        )
        api = load_config()
        self.kube = Kube(api)
        self.tokens = RunnerTokens.from_file(settings.token_key_path)
        self.mirror = CustomResourceMirror(self.kube)
        self.metrics = OperatorMetrics()
        self.supervisor = Supervisor(self.control, self.kube, self.tokens, settings, self.metrics)
        self.app = build_app(
            self.control,
            _authenticator(settings, api),
            self.tokens,
            mirror=self.mirror,
            max_body=settings.max_request_bytes,
            collectors=self.metrics.collectors,
        )
        self._runner = web.AppRunner(self.app, access_log=None)
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def start(cls, settings: Settings) -> Runtime:
        settings.store_path.parent.mkdir(parents=True, exist_ok=True)
        store = await Store.open(settings.store_path, retention=settings.history_retention)
        runtime = cls(settings, store)
        await runtime._serve()
        return runtime

    async def _serve(self) -> None:
        await self._runner.setup()
        for port in dict.fromkeys((self.settings.api_port, self.settings.runner_port)):
            await web.TCPSite(self._runner, self.settings.listen_host, port).start()
            log.info("API listening on %s:%d", self.settings.listen_host, port)
        self._spawn(self.supervisor.run())
        self._spawn(self._sync_status())
        self._spawn(self._expire_history())

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._runner.cleanup()
        await self.store.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(coro))

    async def _sync_status(self) -> None:
        """Follows each changed session's timeline into CR status and Kubernetes Events.

        Cursors live in memory: after a restart a session's timeline is read
        again from the start, and the patches it causes are idempotent.
        Kubernetes Events are recorded only for facts newer than this process.
        """
        cursors: dict[str, int] = {}
        started = datetime.now(UTC)
        while True:
            try:
                for session_id in await self.control.changed_sessions(timeout=5.0):
                    await self._sync_session(session_id, cursors, started)
                self.supervisor.wake()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status sync failed; retrying")
                await asyncio.sleep(1)

    async def _sync_session(
        self, session_id: str, cursors: dict[str, int], since: datetime
    ) -> None:
        session = await self.control.get_session(session_id)
        pod = pods.pod_name(session.name, session.process_epoch) if session.process_live else None
        await self.mirror.sync_session(session, pod)
        turn_ids: set[str] = set()
        while True:
            page = await self.control.list_events(session_id, cursors.get(session_id, 0), 1000)
            for event in page.records:
                if event.turn_id is not None and event.kind != EventKind.TURN_OUTPUT:
                    turn_ids.add(event.turn_id)
                if event.created_at < since:
                    continue
                if event.kind in _TERMINAL:
                    self.metrics.turns_finished.labels(event.kind.removeprefix("turn.")).inc()
                if event.kind in _K8S_EVENT_KINDS:
                    await self.mirror.record(session, event, warning=event.kind in _WARNINGS)
            cursors[session_id] = page.next_after
            if not page.has_more:
                break
        for turn_id in turn_ids:
            await self.mirror.sync_turn(session, await self.control.get_turn(session_id, turn_id))

    async def _expire_history(self) -> None:
        while True:
            await asyncio.sleep(60)
            try:
                await self.control.expire_history(datetime.now(UTC))
            except Exception:
                log.exception("history expiry failed; retrying")
