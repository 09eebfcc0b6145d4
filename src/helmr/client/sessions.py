"""References to a session and its turns, and the session's timeline.

A reference is an address, not a snapshot: every method is one request, and
nothing is cached beyond the view a call returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from pydantic import BaseModel, JsonValue

from helmr.client._http import Transport
from helmr.client.models import Message, Session, StartResult, StopReceipt, Turn, _SendReply
from helmr.errors import HistoryUnavailable, Unavailable
from helmr.events import Event, EventPage
from helmr.protocol import api_routes as routes
from helmr.protocol.api import RetentionBoundary
from helmr.protocol.api_requests import (
    DEFAULT_PAGE,
    MAX_WAIT,
    CancelBody,
    EnqueueBody,
    EventsQuery,
    ForkBody,
    NoBody,
    ResumeBody,
    SecretKey,
    SecretSource,
    SendBody,
    StreamQuery,
    WaitQuery,
)

STREAM_IDLE = 4 * routes.STREAM_KEEPALIVE
"""Seconds of silence on a stream that mean a dead link (the server sends keepalives)."""
RECONNECT_DELAY = (0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Sent:
    """What ``send`` did: ``messaged`` the active turn, or ``enqueued`` a new one."""

    kind: Literal["enqueued", "messaged"]
    turn: TurnRef
    message: Message | None


class TurnRef:
    """One turn of a session. ``state`` is the view returned with the reference, if any."""

    def __init__(
        self, transport: Transport, session_id: str, turn_id: str, state: Turn | None = None
    ) -> None:
        self._http = transport
        self.session_id = session_id
        self.id = turn_id
        self.state = state

    def __repr__(self) -> str:
        return f"TurnRef({self.session_id!r}, {self.id!r})"

    async def retrieve(self) -> Turn:
        return Turn.model_validate(
            await self._http.request("GET", routes.turn(self.session_id, self.id))
        )

    # The spec names it timeout; it bounds the server-side wait, it cancels nothing.
    async def wait(self, *, timeout: float | None = None) -> Turn:  # noqa: ASYNC109
        """The turn once terminal; or, when ``timeout`` (seconds) elapses first, its
        current view with ``timeout=True``: that ends the wait, not the turn. A wait
        longer than the server holds one request (``MAX_WAIT``) is several requests."""
        path = routes.turn_wait(self.session_id, self.id)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT if deadline is None else max(0.0, deadline - time.monotonic())
            chunk = min(left, MAX_WAIT)
            turn = Turn.model_validate(
                await self._http.request(
                    "GET", path, query=WaitQuery.model_construct(timeout=chunk), wait=chunk
                )
            )
            if turn.terminal or (deadline is not None and chunk >= left):
                return turn

    async def send(self, data: JsonValue) -> Message:
        """Sends to exactly this turn while it is active (409 ``turn_not_active`` otherwise).
        The receipt is not proof of handling."""
        reply = _SendReply.model_validate(
            await self._http.request(
                "POST",
                routes.turn_send(self.session_id, self.id),
                body=SendBody.model_construct(data=data),
            )
        )
        if reply.message is None:
            raise ValueError("the server answered an exact-turn send without a message")
        return reply.message

    async def interrupt(self) -> StopReceipt:
        """Stops only this turn and holds the session until ``resume(hold_id=...)``; the turn
        ends ``interrupted`` once its runner has let go of it."""
        return StopReceipt.model_validate(
            await self._http.request(
                "POST", routes.turn_interrupt(self.session_id, self.id), body=NoBody()
            )
        )


class SessionEvents:
    """The session's timeline: finite pages, or a stream that follows it."""

    def __init__(self, transport: Transport, session_id: str) -> None:
        self._http = transport
        self.session_id = session_id

    async def list(self, *, after: int = 0, limit: int = DEFAULT_PAGE) -> EventPage:
        """A page of records after ``after``. A finite page is not a completion signal."""
        return EventPage.model_validate(
            await self._http.request(
                "GET",
                routes.events(self.session_id),
                query=EventsQuery.model_construct(after=after, limit=limit),
            )
        )

    async def stream(self, *, after: int = 0) -> AsyncIterator[Event]:
        """Every record after ``after``, as it is appended, until the session has ended.

        A dropped connection, or a control plane that cannot answer for now (503:
        it restarts, or its store does), is resumed from the last record consumed,
        so none is skipped or repeated. Stopping the iteration stops observing,
        nothing else.

        Raises ``HistoryUnavailable`` when records after the cursor were removed by
        history retention (the cursor is below the Session's ``retained_after``),
        before any record past the gap: stream again from ``error.retained_after``
        to follow what is retained, knowing what was missed.
        """
        cursor = after
        failures = 0
        while True:
            try:
                async for message in self._http.events(
                    routes.events_stream(self.session_id),
                    query=StreamQuery.model_construct(after=cursor),
                    headers={},
                    idle=STREAM_IDLE,
                ):
                    if message.event == routes.STREAM_END_EVENT:
                        return
                    if message.event == routes.STREAM_RETENTION_EVENT:
                        raise _history_unavailable(message.data)
                    record = Event.model_validate_json(message.data)
                    failures = 0
                    yield record
                    cursor = record.sequence
            except (
                aiohttp.ClientConnectionError,
                aiohttp.ClientPayloadError,
                TimeoutError,
                Unavailable,
            ):
                if failures >= len(RECONNECT_DELAY):
                    raise
                await asyncio.sleep(RECONNECT_DELAY[failures])
                failures += 1
            # The server ended the connection without "end" (e.g. it restarted): resume.


def _history_unavailable(data: str) -> HistoryUnavailable:
    """The error the stream's ``retention`` event (its ``data``) means."""
    boundary = RetentionBoundary.model_validate_json(data)
    return HistoryUnavailable(
        f"the records after {boundary.after} up to {boundary.retained_after} are no longer"
        f" retained (history retention); follow on after {boundary.retained_after}",
        after=boundary.after,
        retained_after=boundary.retained_after,
    )


class SessionRef:
    """One session, by id: ``client.sessions.ref(id)``. ``state`` is the view returned
    with the reference (by ``actors.start``), if any."""

    def __init__(self, transport: Transport, session_id: str, state: Session | None = None) -> None:
        self._http = transport
        self.id = session_id
        self.state = state
        self.events = SessionEvents(transport, session_id)

    def __repr__(self) -> str:
        return f"SessionRef({self.id!r})"

    def turn(self, turn_id: str) -> TurnRef:
        return TurnRef(self._http, self.id, turn_id)

    async def retrieve(self) -> Session:
        return Session.model_validate(await self._http.request("GET", routes.session(self.id)))

    async def enqueue(self, input: JsonValue, *, idempotency_key: str | None = None) -> TurnRef:
        """Admits FIFO work; a repeated ``idempotency_key`` returns the same turn."""
        body = EnqueueBody.model_construct(input=input, idempotency_key=idempotency_key)
        turn = Turn.model_validate(
            await self._http.request("POST", routes.session_turns(self.id), body=body)
        )
        return TurnRef(self._http, self.id, turn.id, turn)

    async def send(self, data: JsonValue) -> Sent:
        """Sends to the active turn before settlement, or enqueues when the session is idle."""
        reply = _SendReply.model_validate(
            await self._http.request(
                "POST", routes.session_send(self.id), body=SendBody.model_construct(data=data)
            )
        )
        return Sent(
            reply.kind, TurnRef(self._http, self.id, reply.turn.id, reply.turn), reply.message
        )

    async def interrupt(self) -> StopReceipt:
        """Stops the active turn and holds the session; queued work stays."""
        return StopReceipt.model_validate(
            await self._http.request("POST", routes.session_interrupt(self.id), body=NoBody())
        )

    async def resume(self, *, hold_id: str) -> Session:
        """Releases exactly that hold once converged (else ``HoldNotConverged``); never
        replays the interrupted turn."""
        return await self._control(
            routes.session_resume(self.id), ResumeBody.model_construct(hold_id=hold_id)
        )

    async def cancel(self, *, idempotency_key: str | None = None) -> Session:
        """An acceptance: poll ``retrieve()`` for ``status == "closed"``."""
        return await self._control(
            routes.session_cancel(self.id),
            CancelBody.model_construct(idempotency_key=idempotency_key),
        )

    async def close(self) -> Session:
        """Stops admission; accepted FIFO work drains, then the session closes."""
        return await self._control(routes.session_close(self.id), NoBody())

    async def _control(self, path: str, body: BaseModel) -> Session:
        return Session.model_validate(await self._http.request("POST", path, body=body))


def session_settings(
    env: Mapping[str, str | SecretKey] | None, env_from: Sequence[str | SecretSource] | None
) -> dict[str, Any]:
    """A start's or fork's ``env`` and ``env_from`` fields, as named (a Secret's name
    alone is every key of it, unprefixed)."""
    settings: dict[str, Any] = {}
    if env is not None:
        settings["env"] = dict(env)
    if env_from is not None:
        settings["env_from"] = [
            SecretSource.model_construct(secret=source) if isinstance(source, str) else source
            for source in env_from
        ]
    return settings


class Sessions:
    def __init__(self, transport: Transport) -> None:
        self._http = transport

    def ref(self, session_id: str) -> SessionRef:
        return SessionRef(self._http, session_id)

    async def fork(
        self,
        session: SessionRef | str,
        *,
        at_turn: TurnRef | str,
        workspace: str | None = None,
        idempotency_key: str | None = None,
        env: Mapping[str, str | SecretKey] | None = None,
        env_from: Sequence[str | SecretSource] | None = None,
    ) -> SessionRef:
        """A new Session of the same actor on a new Workspace (``workspace``, else
        ``fork-<ulid>``) whose disk is restored from the save of the completed Turn
        ``at_turn``; ``session`` is untouched and keeps running. ``SaveNotReady``
        while that save is being taken (fork again once it is); ``Conflict`` when
        the Turn has no save of its own or its save failed. A repeated
        ``idempotency_key`` returns the same Session.

        The fork runs with the source's environment variables unless ``env`` or
        ``env_from`` is given (as ``actors.start`` takes them): then with those only."""
        session_id = session if isinstance(session, str) else session.id
        body = ForkBody.model_construct(
            at_turn=at_turn if isinstance(at_turn, str) else at_turn.id,
            workspace=workspace,
            idempotency_key=idempotency_key,
            **session_settings(env, env_from),
        )
        reply = StartResult.model_validate(
            await self._http.request("POST", routes.session_fork(session_id), body=body)
        )
        return SessionRef(self._http, reply.session.id, reply.session)
