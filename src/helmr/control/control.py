"""``Control``: the async entry point the server and the operator drive.

Every control is one store transaction (run on the store's writer thread)
so a state change commits with the events that record it; long polls wait
on the store's per-Session signals, never on timers alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Literal, TypeVar

from pydantic import JsonValue

from helmr.control import messages, processes, sessions, turns
from helmr.control.config import ControlConfig
from helmr.control.record import record
from helmr.control.views import (
    NO_RESULT,
    NoResult,
    ProcessOutcome,
    ProcessStop,
    load_session,
    turn_view,
)
from helmr.errors import InvalidInput, ReceiveTimeout
from helmr.events import Event, EventKind, EventPage
from helmr.protocol import ErrorInfo
from helmr.protocol.api import MessageView, SendResult, SessionView, StopReceipt, TurnView
from helmr.store import Expired, Store
from helmr.store import turns as turn_rows

T = TypeVar("T")

REPORTED_KINDS = frozenset(
    {
        EventKind.SESSION_RECOVERY_GAP,
        EventKind.SESSION_STORAGE_PRESSURE,
        EventKind.SLACK_DELIVERY_UNAVAILABLE,
    }
)
"""Facts the operator observes and reports with :meth:`Control.record_event`; every
other kind is recorded by the state machine itself."""


class Control:
    def __init__(self, store: Store, config: ControlConfig | None = None) -> None:
        self._store = store
        self._config = config or ControlConfig()

    # Public side ---------------------------------------------------------------------------

    async def open_session(
        self,
        *,
        namespace: str,
        name: str,
        actor: str,
        workspace: str,
        key: str | None = None,
        idempotency_key: str | None = None,
        max_turn_duration: timedelta | None = None,
    ) -> SessionView:
        return await self._store.write(
            partial(
                sessions.open_session,
                namespace=namespace,
                name=name,
                actor=actor,
                workspace=workspace,
                key=key,
                idempotency_key=idempotency_key,
                max_turn_duration=max_turn_duration,
            )
        )

    async def get_session(self, session_id: str) -> SessionView:
        return await self._store.read(partial(load_session, session_id=session_id))

    async def enqueue(
        self,
        session_id: str,
        input: JsonValue,
        *,
        idempotency_key: str | None = None,
        source: str = "api",
    ) -> TurnView:
        return await self._store.write(
            partial(
                turns.enqueue,
                session_id=session_id,
                input=input,
                idempotency_key=idempotency_key,
                source=source,
            )
        )

    async def get_turn(self, session_id: str, turn_id: str) -> TurnView:
        return await self._store.read(
            lambda rt: turn_view(turn_rows.require(rt, session_id, turn_id))
        )

    async def wait_turn(
        self,
        session_id: str,
        turn_id: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> TurnView:
        """The Turn once terminal, or as it is when ``timeout`` ends (the wait only)."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.get_turn, session_id, turn_id),
            lambda turn: turn.terminal,
        )

    async def send(
        self, session_id: str, data: JsonValue, turn_id: str | None = None
    ) -> SendResult:
        return await self._store.write(
            partial(messages.send, session_id=session_id, data=data, turn_id=turn_id)
        )

    async def interrupt(self, session_id: str, turn_id: str | None = None) -> StopReceipt:
        return await self._store.write(
            partial(
                sessions.interrupt,
                session_id=session_id,
                turn_id=turn_id,
                stop_grace=self._config.stop_grace,
            )
        )

    async def resume(self, session_id: str, hold_id: str) -> SessionView:
        return await self._store.write(
            partial(sessions.resume, session_id=session_id, hold_id=hold_id)
        )

    async def cancel(self, session_id: str) -> SessionView:
        return await self._store.write(
            partial(sessions.cancel, session_id=session_id, stop_grace=self._config.stop_grace)
        )

    async def close(
        self, session_id: str, *, how: Literal["close", "idle"] = "close"
    ) -> SessionView:
        return await self._store.write(partial(sessions.close, session_id=session_id, how=how))

    async def list_events(self, session_id: str, after: int = 0, limit: int = 100) -> EventPage:
        return await self._store.page(session_id, after, limit)

    async def wait_events(
        self,
        session_id: str,
        after: int = 0,
        timeout: float = 30.0,  # noqa: ASYNC109 (see _wait_for)
        limit: int = 100,
    ) -> EventPage:
        """The next page after ``after``, waiting up to ``timeout`` for one to exist."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.list_events, session_id, after, limit),
            lambda page: bool(page.records),
        )

    # Runner side ---------------------------------------------------------------------------

    async def receive(
        self,
        session_id: str,
        epoch: int,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> TurnView | None:
        """The Turn to run; None once there is none for this process (closing
        Session drained, or the process must stop); ReceiveTimeout otherwise."""
        answer = await self._wait_for(
            session_id,
            timeout,
            partial(
                self._store.write, partial(turns.take_next, session_id=session_id, epoch=epoch)
            ),
            lambda found: found is not None,
        )
        if answer is None:
            raise ReceiveTimeout(f"no turn for session {session_id} within {timeout}s")
        return None if answer == "drained" else answer

    async def output(
        self,
        session_id: str,
        epoch: int,
        turn_id: str | None,
        value: JsonValue,
        idempotency_key: str | None = None,
    ) -> Event:
        return await self._store.write(
            partial(
                turns.output,
                session_id=session_id,
                epoch=epoch,
                turn_id=turn_id,
                value=value,
                idempotency_key=idempotency_key,
            )
        )

    async def respond(
        self, session_id: str, epoch: int, turn_id: str, value: JsonValue
    ) -> TurnView:
        return await self._store.write(
            partial(turns.respond, session_id=session_id, epoch=epoch, turn_id=turn_id, value=value)
        )

    async def complete(
        self,
        session_id: str,
        epoch: int,
        turn_id: str,
        result: JsonValue | NoResult = NO_RESULT,
    ) -> TurnView:
        return await self._store.write(
            partial(
                turns.complete, session_id=session_id, epoch=epoch, turn_id=turn_id, result=result
            )
        )

    async def fail(self, session_id: str, epoch: int, turn_id: str, error: ErrorInfo) -> TurnView:
        return await self._store.write(
            partial(turns.fail, session_id=session_id, epoch=epoch, turn_id=turn_id, error=error)
        )

    async def messages_ready(self, session_id: str, epoch: int, turn_id: str) -> TurnView:
        return await self._store.write(
            partial(messages.ready, session_id=session_id, epoch=epoch, turn_id=turn_id)
        )

    async def next_message(
        self,
        session_id: str,
        epoch: int,
        turn_id: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> MessageView | None:
        """The oldest message not yet started, or None when ``timeout`` ends first."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(
                self._store.read,
                partial(messages.next_waiting, session_id=session_id, epoch=epoch, turn_id=turn_id),
            ),
            lambda message: message is not None,
        )

    async def message_started(
        self, session_id: str, epoch: int, turn_id: str, message_id: str
    ) -> MessageView:
        return await self._report(session_id, epoch, turn_id, message_id, "started", None)

    async def message_delivered(
        self, session_id: str, epoch: int, turn_id: str, message_id: str
    ) -> MessageView:
        return await self._report(session_id, epoch, turn_id, message_id, "delivered", None)

    async def message_rejected(
        self, session_id: str, epoch: int, turn_id: str, message_id: str, reason: str | None = None
    ) -> MessageView:
        return await self._report(session_id, epoch, turn_id, message_id, "rejected", reason)

    async def message_unknown(
        self, session_id: str, epoch: int, turn_id: str, message_id: str, reason: str | None = None
    ) -> MessageView:
        """The handler failed unexpectedly: the message's outcome is unknown."""
        return await self._report(session_id, epoch, turn_id, message_id, "unknown", reason)

    # Operator side -------------------------------------------------------------------------

    async def process_started(
        self, session_id: str, *, max_turn_duration: timedelta | None = None
    ) -> int:
        """A new runner process (epoch) for the session, with the turn limit it runs under."""
        return await self._store.write(
            partial(processes.started, session_id=session_id, max_turn_duration=max_turn_duration)
        )

    async def process_exited(
        self, session_id: str, epoch: int, exit_code: int, *, failure: str | None = None
    ) -> ProcessOutcome:
        """The process ended with ``exit_code``. Pass ``failure`` (the reason, e.g.
        ``stop_deadline_elapsed``) when the operator knows it was a failure;
        otherwise the exit code and the Session's state decide."""
        return await self._store.write(
            partial(
                processes.exited,
                config=self._config,
                session_id=session_id,
                epoch=epoch,
                exit_code=exit_code,
                failure=failure,
            )
        )

    async def execution_lost(
        self,
        session_id: str,
        epoch: int,
        *,
        computer_version: str | None = None,
        computer_id: str | None = None,
    ) -> ProcessOutcome:
        return await self._store.write(
            partial(
                processes.execution_lost,
                config=self._config,
                session_id=session_id,
                epoch=epoch,
                computer_version=computer_version,
                computer_id=computer_id,
            )
        )

    async def expire_deadlines(self, now: datetime) -> list[ProcessStop]:
        """Interrupts overrunning Turns, and gives up on processes that did not let go of
        an interrupted Turn within ``ControlConfig.stop_grace``; returns the processes to
        stop for both."""
        return await self._store.write(partial(processes.expire_deadlines, now=now))

    async def next_deadline(self) -> datetime | None:
        """When ``expire_deadlines`` next has work: the earliest running Turn's deadline or
        stop grace period's end."""
        return await self._store.read(processes.next_deadline)

    async def processes_to_stop(self) -> list[ProcessStop]:
        """Every live process asked to stop (deadlines, close, cancel, failure), until it ends."""
        return await self._store.read(processes.to_stop)

    async def live_processes(self) -> list[SessionView]:
        """Sessions whose runner process is live (to check against pods after a restart)."""
        return await self._store.read(processes.live)

    async def changed_sessions(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """Sessions changed since the previous call (one consumer: the status mirror)."""
        return await self._store.changed_sessions(timeout)

    async def sessions_needing_runner(self) -> list[SessionView]:
        """Open or closing Sessions with queued work, no hold and no live process."""
        return await self._store.read(processes.needing_runner)

    async def fail_session(self, session_id: str, reason: str) -> SessionView:
        """Terminates the Session (e.g. its actor cannot initialize)."""
        return await self._store.write(partial(sessions.fail, session_id=session_id, reason=reason))

    async def record_event(
        self,
        session_id: str,
        kind: EventKind,
        data: JsonValue,
        *,
        subject: str | int,
        turn_id: str | None = None,
        process_epoch: int | None = None,
    ) -> Event:
        """Records a fact the operator observed (one of :data:`REPORTED_KINDS`), once per
        ``subject``."""
        if kind not in REPORTED_KINDS:
            raise InvalidInput(f"{kind} is recorded by the state machine, not reported")
        return await self._store.write(
            partial(
                record,
                session_id=session_id,
                kind=kind,
                data=data,
                subject=subject,
                turn_id=turn_id,
                epoch=process_epoch,
            )
        )

    async def expire_history(self, now: datetime) -> Expired:
        """Applies the store's history retention period as of ``now``."""
        return await self._store.expire(now)

    # ---------------------------------------------------------------------------------------

    async def _report(
        self,
        session_id: str,
        epoch: int,
        turn_id: str,
        message_id: str,
        outcome: messages.MessageOutcome,
        reason: str | None,
    ) -> MessageView:
        return await self._store.write(
            partial(
                messages.report,
                session_id=session_id,
                epoch=epoch,
                turn_id=turn_id,
                message_id=message_id,
                outcome=outcome,
                reason=reason,
            )
        )

    async def _wait_for(
        self,
        session_id: str,
        # A long poll's timeout shapes its answer ("nothing yet"), which cancelling
        # the caller with asyncio.timeout could not give.
        timeout: float,  # noqa: ASYNC109
        attempt: Callable[[], Awaitable[T]],
        ready: Callable[[T], bool],
    ) -> T:
        """Repeats ``attempt`` after each commit touching the Session until its value
        is ``ready`` or ``timeout`` seconds pass; returns the last value."""
        if timeout < 0:
            raise InvalidInput("timeout must not be negative", timeout=timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._store.watching(session_id) as signal:
                value = await attempt()
                remaining = deadline - loop.time()
                if ready(value) or remaining <= 0:
                    return value
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(signal.wait(), remaining)
