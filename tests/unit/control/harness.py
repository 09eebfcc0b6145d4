"""Shared helpers of the control tests (imported by the test_control_* modules).

A :class:`Harness` is a real store (a temporary SQLite file or PostgreSQL
database, ``store_location``) with a controllable
clock (``tests.compose``), the :class:`~helmr.control.Control` over it, and
the steps many tests take to reach a state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from itertools import count
from pathlib import Path

from pydantic import JsonValue

from helmr.control import ControlConfig, SessionLimits, SessionView, TurnView
from helmr.events import Event
from tests.compose import Clock, Plane, open_plane

DEFAULT_LIMITS = SessionLimits(
    queue_limit=100,
    max_turn_duration=None,
    max_run_duration=None,
    idle_ttl=None,
    idle_timeout_seconds=None,
    retry_max_attempts=3,
    retry_backoff=timedelta(seconds=5),
)
"""The limits of an Actor that sets none (the CRD's defaults), as resolved for a Session."""


class Harness:
    def __init__(self, plane: Plane, clock: Clock) -> None:
        self.store = plane.store
        self.clock = clock
        self.control = plane.control
        self._names = count(1)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        location: str | Path,
        *,
        clock: Clock | None = None,
        config: ControlConfig | None = None,
        retention: timedelta | None = None,
    ) -> AsyncIterator[Harness]:
        clock = clock or Clock()
        async with open_plane(location, clock=clock, config=config, retention=retention) as plane:
            yield cls(plane, clock)

    async def session(self, max_turn_duration: timedelta | None = None) -> SessionView:
        """A new open Session; with ``max_turn_duration``, its limits resolved with it
        (otherwise unresolved, as before the operator has read its Actor)."""
        n = next(self._names)
        session = await self.control.open_session(
            namespace="team", name=f"s{n}", actor="reviewer", workspace=f"ws{n}"
        )
        if max_turn_duration is None:
            return session
        limits = replace(DEFAULT_LIMITS, max_turn_duration=max_turn_duration)
        return await self.control.resolve_limits(session.id, limits)

    async def running(self, session_id: str, input: JsonValue = "go") -> tuple[int, TurnView]:
        """Starts a process and gives it a new Turn; returns the epoch and the running Turn."""
        epoch = await self.control.process_started(session_id)
        await self.control.enqueue(session_id, input)
        turn = await self.control.receive(session_id, epoch, timeout=0)
        assert turn is not None
        assert turn.status == "running"
        return epoch, turn

    async def message(self, session_id: str, data: JsonValue) -> str:
        """Sends to the active Turn; returns the message id."""
        sent = await self.control.send(session_id, data)
        assert sent.kind == "messaged"
        assert sent.message is not None
        return sent.message.id

    async def events(self, session_id: str, after: int = 0) -> list[Event]:
        page = await self.control.list_events(session_id, after=after, limit=1000)
        assert not page.has_more
        return page.records

    async def kinds(self, session_id: str, after: int = 0) -> list[str]:
        return [event.kind.value for event in await self.events(session_id, after)]

    async def last_sequence(self, session_id: str) -> int:
        events = await self.events(session_id)
        return events[-1].sequence if events else 0
