"""The dev plane a test drives (:class:`Plane`) and one Session of it (:class:`PlaneSession`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from itertools import count
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import JsonValue

from helmr.client import Client, Event, Sent, Session, SessionRef, StopReceipt, Turn, TurnRef
from helmr.dev import DevOptions, DevPlane
from helmr.operator.disks.manifests import disk_usage_spec

WAIT = 30.0
"""Seconds a wait lasts by default before it raises ``TimeoutError``."""
POLL = 0.05
FILL = ".helmr-fill"
"""The file :meth:`PlaneSession.fill_computer` writes on the Computer."""

T = TypeVar("T")


class StartPlane(Protocol):
    """The ``helmr_dev`` fixture: :func:`start_plane` with its options, but ``root``
    (a directory of the test's ``tmp_path``)."""

    def __call__(
        self,
        actor: str,
        *,
        spec: Mapping[str, Any] | None = None,
        stop_grace: timedelta | None = None,
        max_execution_losses: int = 3,
        history_retention: timedelta | None = None,
    ) -> Awaitable[Plane]: ...


@asynccontextmanager
async def start_plane(
    actor: str,
    root: Path,
    *,
    spec: Mapping[str, Any] | None = None,
    stop_grace: timedelta | None = None,
    max_execution_losses: int = 3,
    history_retention: timedelta | None = None,
) -> AsyncIterator[Plane]:
    """A dev plane running ``actor`` (a directory with ``actor.yaml``, or
    ``MODULE:ATTR``) with its store and Workspaces under ``root``, stopped on exit.
    ``spec`` overrides the Actor manifest's spec (camelCase); the runners' output
    goes to ``root/logs``. ``history_retention`` shortens the Environment's (its
    expiry then runs every ``POLL`` seconds)."""
    options = DevOptions(
        root=root,
        spec=spec,
        max_execution_losses=max_execution_losses,
        runner_logs=True,
        reload=False,
        reconcile_interval=0.2,
    )
    if stop_grace is not None:
        options = replace(options, stop_grace=stop_grace)
    if history_retention is not None:
        options = replace(options, history_retention=history_retention, expiry_interval=POLL)
    async with DevPlane(actor, options) as dev, Client(dev.url, dev.token) as client:
        yield Plane(dev, client)


class Plane:
    def __init__(self, dev: DevPlane, client: Client) -> None:
        self.dev = dev
        self.client = client
        self._workspaces = count(1)

    @property
    def url(self) -> str:
        return self.dev.url

    @property
    def token(self) -> str:
        return self.dev.token

    @property
    def namespace(self) -> str:
        return self.dev.namespace

    @property
    def actor(self) -> str:
        return self.dev.actor

    @property
    def logs(self) -> Path:
        """Where each runner process's output is (``<session name>-process-<epoch>.log``)."""
        return self.dev.root / "logs"

    async def session(self, workspace: str | None = None) -> PlaneSession:
        """A new Session of the actor on ``workspace`` (a new one unless given)."""
        name = workspace or f"workspace-{next(self._workspaces)}"
        started = await self.client.actors.start(
            self.actor, namespace=self.namespace, workspace=name
        )
        return PlaneSession(self, started.session)


class PlaneSession:
    def __init__(self, plane: Plane, ref: SessionRef) -> None:
        self.plane = plane
        self.ref = ref
        self.id = ref.id

    # Work and control, as a client ----------------------------------------------------------

    async def enqueue(self, input: JsonValue) -> TurnRef:
        return await self.ref.enqueue(input)

    async def run(self, input: JsonValue, *, timeout: float = WAIT) -> Turn:  # noqa: ASYNC109
        """Enqueues ``input`` and waits for its Turn to end: the Turn's final view."""
        return await self.ended(await self.enqueue(input), timeout=timeout)

    async def ended(self, turn: TurnRef, *, timeout: float = WAIT) -> Turn:  # noqa: ASYNC109
        """The Turn once terminal."""
        view = await turn.wait(timeout=timeout)
        if not view.terminal:
            raise TimeoutError(f"turn {turn.id} is {view.status} after {timeout:g}s")
        return view

    async def running(self, turn: TurnRef, *, timeout: float = WAIT) -> Turn:  # noqa: ASYNC109
        """The Turn once a runner holds it (its status ``running``)."""
        return await _until(turn.retrieve, lambda t: t.status == "running", timeout, "running")

    async def turn_until(
        self,
        turn: TurnRef,
        condition: Callable[[Turn], bool],
        *,
        timeout: float = WAIT,  # noqa: ASYNC109
    ) -> Turn:
        """The Turn once ``condition`` holds of it (``lambda t: t.payload_expired``)."""
        return await _until(turn.retrieve, condition, timeout, "the condition")

    async def send(self, data: JsonValue) -> Sent:
        """To the active Turn (enqueued as a new one when the Session is idle)."""
        return await self.ref.send(data)

    async def interrupt(self) -> StopReceipt:
        return await self.ref.interrupt()

    async def resume(self, hold_id: str | None = None, *, timeout: float = WAIT) -> Session:  # noqa: ASYNC109
        """Releases ``hold_id``, or the Session's hold once it has converged."""
        if hold_id is None:
            held = await self.until(
                lambda s: s.hold is not None and s.hold.converged, timeout=timeout
            )
            assert held.hold is not None
            hold_id = held.hold.hold_id
        return await self.ref.resume(hold_id=hold_id)

    async def cancel(self) -> Session:
        return await self.ref.cancel()

    async def close(self) -> Session:
        return await self.ref.close()

    async def retrieve(self) -> Session:
        return await self.ref.retrieve()

    async def until(
        self,
        condition: Callable[[Session], bool],
        *,
        timeout: float = WAIT,  # noqa: ASYNC109
    ) -> Session:
        """The Session once ``condition`` holds of it (``lambda s: s.status == "closed"``)."""
        return await _until(self.retrieve, condition, timeout, "the condition")

    # The timeline ---------------------------------------------------------------------------

    async def events(self) -> list[Event]:
        """Every record of the Session's timeline so far."""
        records: list[Event] = []
        after = 0
        while True:
            page = await self.ref.events.list(after=after)
            records += page.records
            if not page.has_more:
                return records
            after = page.next_after

    async def wait_for(
        self,
        kind: str,
        *,
        count: int = 1,
        timeout: float = WAIT,  # noqa: ASYNC109
    ) -> Event:
        """The ``count``-th record of ``kind`` (``"session.execution_lost"``) in the timeline."""

        async def found() -> list[Event]:
            return [e for e in await self.events() if e.kind == kind]

        matching = await _until(found, lambda es: len(es) >= count, timeout, f"{count} {kind}")
        return matching[count - 1]

    async def saved(self, *, timeout: float = WAIT) -> str:  # noqa: ASYNC109
        """The Workspace's Computer version once every save requested so far is
        committed (each completed Turn's files are in it): what an execution loss
        now restores. Its id, as ``session.execution_lost`` names it."""
        view = await self.retrieve()
        workspace = self.plane.client.workspaces.ref(view.workspace_id)
        saved = await _until(
            workspace.retrieve,
            lambda w: w.computer_version is not None and w.pending_saves == 0,
            timeout,
            "the Workspace's saves",
        )
        assert saved.computer_version is not None
        return saved.computer_version

    # What a cluster does to a runner -------------------------------------------------------

    def lose_execution(self) -> None:
        """Kills the Session's runner process (SIGKILL to its process group), as a node
        lost or an eviction ends a runner pod: ``session.execution_lost`` follows, the
        next runner's Computer is restored from the last save."""
        if not self.plane.dev.runners.kill(self.id):
            raise RuntimeError(f"session {self.id} has no runner process to lose")

    async def computer(self) -> Path:
        """The directory that is the Session's Computer (its current disk)."""
        view = await self.retrieve()
        return await self.plane.dev.disks.computer(view)

    async def fill_computer(self, fraction: float) -> Path:
        """Writes a file that makes ``fraction`` of the Computer's size used, as an
        actor's files would: the runner measures it (every ``usageIntervalSeconds``)
        and reports it, and the storage pressure episode follows. Give the Actor a
        small ``computer.size`` (``spec={"computer": {"size": "8Mi",
        "usageIntervalSeconds": 1}}``): the file is that size."""
        capacity = disk_usage_spec(self.plane.dev.source.actor.spec.computer).limits.capacity_bytes
        path = await self.computer() / FILL
        size = int(capacity * fraction)
        await asyncio.to_thread(_write_zeros, path, size)
        return path

    async def free_computer(self) -> None:
        """Removes what :meth:`fill_computer` wrote."""
        path = await self.computer() / FILL
        await asyncio.to_thread(path.unlink, missing_ok=True)


async def _until(
    read: Callable[[], Awaitable[T]],
    condition: Callable[[T], bool],
    timeout: float,  # noqa: ASYNC109
    what: str,
) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await read()
        if condition(value):
            return value
        if loop.time() >= deadline:
            raise TimeoutError(f"waited {timeout:g}s for {what}; last seen: {value!r}")
        await asyncio.sleep(POLL)


def _write_zeros(path: Path, size: int) -> None:
    chunk = b"\0" * (1 << 20)
    with path.open("wb") as file:
        left = size
        while left > 0:
            left -= file.write(chunk[: min(left, len(chunk))])
        file.flush()
        os.fsync(file.fileno())
