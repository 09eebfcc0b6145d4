"""``DevPlane``: the control plane of ``helmr dev`` and ``helmr.testing``, in one process.

The operator's own parts, assembled without a cluster: the SQLite store in a
project-local directory, the same ``Control``, REST and runner APIs and the same
``Supervisor`` and its decisions, with runner processes as local subprocesses
(:mod:`helmr.dev.processes`) on Computer disks that are directories
(:mod:`helmr.dev.directories`). No kopf, no apiserver: the Actor is read from disk
(:mod:`helmr.dev.actor_source`) and the API authenticates one static token.

When the actor's files change, each runner is replaced at its Session's next Turn
boundary, never during a Turn: its process is asked to stop (``code_changed`` in
the timeline's ``session.process_stopped``) once it holds no Turn, and the next
Turn starts a process on the new code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from helmr.control import ControlConfig
from helmr.control.control import ApiControl
from helmr.control.operator_api import OperatorControl
from helmr.dev.actor_source import ActorSource, load_actor
from helmr.dev.directories import DirectoryDisks
from helmr.dev.processes import ProcessRunners
from helmr.dev.resources import DevResources
from helmr.dev.tokens import RunnerTokens
from helmr.dev.watch import FileWatch
from helmr.operator.history_expiry import EXPIRY_INTERVAL, expire_history_periodically
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import HISTORY_RETENTION, Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.server import app_runner, build_app, listen
from helmr.server.auth import Grant, StaticAuthenticator, User
from helmr.store import Store

log = logging.getLogger(__name__)

ROOT = Path(".helmr")
"""The project-local directory ``helmr dev`` keeps its store and Workspaces in."""
NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class DevOptions:
    """How a dev plane runs; every field has a default that suits ``helmr dev``."""

    root: Path = ROOT
    """Its store (``helmr.db``), Workspaces, runner tokens and logs."""
    namespace: str = NAMESPACE
    """The namespace its Actor is in (clients name it, as on a cluster)."""
    host: str = "127.0.0.1"
    port: int = 0
    """0: a free port."""
    token: str | None = None
    """The API's bearer token; None: the one kept in ``root/token`` (made once)."""
    spec: Mapping[str, Any] | None = None
    """Overrides of the Actor manifest's spec, camelCase (``{"maxTurnDurationSeconds": 2}``)."""
    stop_grace: timedelta = timedelta(seconds=10)
    """How long a process has to let go of an interrupted Turn (``HELMR_STOP_GRACE_SECONDS``)."""
    max_execution_losses: int = 3
    reconcile_interval: float = 1.0
    """Seconds between the supervisor's passes when nothing wakes it sooner."""
    runner_logs: bool = False
    """The runners' output goes to ``root/logs/<runner>.log`` (False: this process's)."""
    reload: bool = True
    """Replace runners when the actor's files change."""
    watch_interval: float = 0.5
    history_retention: timedelta | None = HISTORY_RETENTION
    """Payloads and events older than this expire (None: never), as the operator's
    ``HELMR_HISTORY_RETENTION_SECONDS``."""
    expiry_interval: float = EXPIRY_INTERVAL
    """Seconds between expiry passes."""


class DevPlane:
    def __init__(self, source: str, options: DevOptions) -> None:
        """Use :meth:`start` (or ``async with DevPlane(...)``)."""
        self.where = source
        self.options = options
        self.source: ActorSource = load_actor(source, options.namespace, spec=options.spec)
        self.root = options.root.resolve()
        self.token = options.token or _kept_token(self.root)
        self.url = ""
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._store: Store | None = None

    @property
    def namespace(self) -> str:
        return self.options.namespace

    @property
    def actor(self) -> str:
        """The Actor's name, as clients start its Sessions."""
        return self.source.name

    @classmethod
    async def start(cls, source: str, options: DevOptions | None = None) -> DevPlane:
        plane = cls(source, options or DevOptions())
        await plane._start()
        return plane

    async def __aenter__(self) -> DevPlane:
        await self._start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _start(self) -> None:
        options = self.options
        self.root.mkdir(parents=True, exist_ok=True)
        self._store = store = await Store.open(
            self.root / "helmr.db", retention=options.history_retention
        )
        config = ControlConfig(
            max_execution_losses=options.max_execution_losses, stop_grace=options.stop_grace
        )
        self.control = OperatorControl(store.background(), config, fence=None)
        self.api_control = ApiControl(store, config)
        self.tokens = RunnerTokens(self.root / "tokens")
        logs = self.root / "logs" if options.runner_logs else None
        self.runners = ProcessRunners(self.tokens, self.source.python_path, log_dir=logs)
        self.disks = DirectoryDisks(self.control, self.root / "workspaces")
        users = {self.token: Grant(user=User(name="dev"))}
        app = build_app(
            self.api_control, StaticAuthenticator(users), self.tokens, workspaces=self.disks
        )
        self._runner = app_runner(app)
        await self._runner.setup()
        await listen(self._runner, options.host, options.port)
        port = self._runner.addresses[0][1]
        self.url = f"http://{options.host}:{port}"
        settings = Settings(
            store_path=self.root / "helmr.db",
            runner_url=self.url,
            reconcile_interval=options.reconcile_interval,
            stop_grace=options.stop_grace,
            auth=f"static:{self.token}",
            log_format="text",
        )
        self.supervisor = Supervisor(
            self.control,
            None,
            RunnerPods(),
            settings,
            OperatorMetrics(),
            runners=self.runners,
            disks=self.disks,
            resources=DevResources(lambda: self.source),
        )
        self.runners.report = self.supervisor.pod_reported
        self._spawn(self.supervisor.run())
        self._spawn(self._wake_on_changes())
        self._spawn(expire_history_periodically(self.control, options.expiry_interval))
        if options.reload:
            watch = FileWatch(self.source.watched, ignored=(self.root,))
            self._spawn(self._replace_on_change(watch))

    async def stop(self) -> None:
        # Each ends at its cancellation: their waits are asyncio.timeout, never a
        # wait_for that loses one (tests/unit/operator/test_cancelled_loops.py).
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._runner is not None:
            await self.runners.close()
            await self._runner.cleanup()
            self._runner = None
        if self._store is not None:
            await self._store.close()
            self._store = None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(work))

    async def _wake_on_changes(self) -> None:
        """A pass at each change of a Session (a Turn admitted, a stop asked for), as
        the operator's status mirror wakes its supervisor: work starts at once."""
        while True:
            if await self.control.changed_sessions(timeout=5.0):
                self.supervisor.wake()

    async def _replace_on_change(self, watch: FileWatch) -> None:
        """Each change of the actor's files raises the code version; every runner on
        an older one is asked to stop once its Session holds no Turn."""
        while True:
            await asyncio.sleep(self.options.watch_interval)
            if watch.changed():
                await self._reload()
            await self._replace_stale()

    async def _reload(self) -> None:
        try:
            self.source = load_actor(self.where, self.namespace, spec=self.options.spec)
        except Exception as exc:
            log.warning("the actor's manifest does not load (kept the last one): %s", exc)
        self.runners.code_version += 1
        log.info("the actor's files changed: runners are replaced at their next Turn boundary")

    async def _replace_stale(self) -> None:
        for runner in self.runners.local_runners():
            if runner.code_version == self.runners.code_version or runner.removing:
                continue
            ref = runner.ref
            stop = await self.control.replace_between_turns(ref.session_id, ref.epoch)
            if stop is not None:
                self.supervisor.wake()


def _kept_token(root: Path) -> str:
    """The API token kept in ``root/token``, made on first use: a restarted
    ``helmr dev`` keeps its clients' token."""
    path = root / "token"
    if path.is_file():
        return path.read_text().strip()
    root.mkdir(parents=True, exist_ok=True)
    token = f"dev-{secrets.token_urlsafe(24)}"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return token
