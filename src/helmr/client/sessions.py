"""References to a session and its turns, and the session's timeline.

A reference is an address, not a snapshot: every method is one request, and
nothing is cached beyond the view a call returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
from pydantic import JsonValue

from helmr.client._http import Transport
from helmr.client.models import Message, Session, StopReceipt, Turn, _SendReply
from helmr.events import Event, EventPage

# The longest wait one request asks of the server (its limit); longer waits
# are several requests.
MAX_WAIT = 300.0
STREAM_IDLE = 60.0  # the server sends a keepalive every 15 s; silence this long is a dead link
RECONNECT_DELAY = (0.5, 1.0, 2.0, 4.0, 8.0)


def _seg(value: str) -> str:
    return quote(value, safe="")


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
        self._path = f"/v1/sessions/{_seg(session_id)}/turns/{_seg(turn_id)}"

    def __repr__(self) -> str:
        return f"TurnRef({self.session_id!r}, {self.id!r})"

    async def retrieve(self) -> Turn:
        return Turn.model_validate(await self._http.request("GET", self._path))

    # The spec names it timeout; it bounds the server-side wait, it cancels nothing.
    async def wait(self, *, timeout: float | None = None) -> Turn:  # noqa: ASYNC109
        """The turn once terminal; or, when ``timeout`` (seconds) elapses first, its
        current view with ``timeout=True``: that ends the wait, not the turn."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT if deadline is None else max(0.0, deadline - time.monotonic())
            chunk = min(left, MAX_WAIT)
            turn = Turn.model_validate(
                await self._http.request(
                    "GET", self._path + "/wait", params={"timeout": f"{chunk:.3f}"}, wait=chunk
                )
            )
            if turn.terminal or (deadline is not None and chunk >= left):
                return turn

    async def send(self, data: JsonValue) -> Message:
        """Sends to exactly this turn while it is active (409 ``turn_not_active`` otherwise).
        The receipt is not proof of handling."""
        reply = _SendReply.model_validate(
            await self._http.request("POST", self._path + "/send", body={"data": data})
        )
        if reply.message is None:
            raise ValueError("the server answered an exact-turn send without a message")
        return reply.message

    async def interrupt(self) -> StopReceipt:
        """Stops only this turn; the next queued turn runs once processing has stopped."""
        return StopReceipt.model_validate(
            await self._http.request("POST", self._path + "/interrupt", body={})
        )


class SessionEvents:
    """The session's timeline: finite pages, or a stream that follows it."""

    def __init__(self, transport: Transport, session_id: str) -> None:
        self._http = transport
        self._path = f"/v1/sessions/{_seg(session_id)}/events"

    async def list(self, *, after: int = 0, limit: int = 100) -> EventPage:
        """A page of records after ``after``. A finite page is not a completion signal."""
        return EventPage.model_validate(
            await self._http.request(
                "GET", self._path, params={"after": str(after), "limit": str(limit)}
            )
        )

    async def stream(self, *, after: int = 0) -> AsyncIterator[Event]:
        """Every record after ``after``, as it is appended, until the session has ended.

        A dropped connection is resumed from the last record consumed, so none is
        skipped or repeated. Stopping the iteration stops observing, nothing else.
        """
        cursor = after
        failures = 0
        while True:
            try:
                async for message in self._http.events(
                    f"{self._path}/stream?after={cursor}", headers={}, idle=STREAM_IDLE
                ):
                    if message.event == "end":
                        return
                    record = Event.model_validate_json(message.data)
                    failures = 0
                    yield record
                    cursor = record.sequence
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError):
                if failures >= len(RECONNECT_DELAY):
                    raise
                await asyncio.sleep(RECONNECT_DELAY[failures])
                failures += 1
            # The server ended the connection without "end" (e.g. it restarted): resume.


class SessionRef:
    """One session, by id: ``client.sessions.ref(id)``. ``state`` is the view returned
    with the reference (by ``actors.start``), if any."""

    def __init__(self, transport: Transport, session_id: str, state: Session | None = None) -> None:
        self._http = transport
        self.id = session_id
        self.state = state
        self.events = SessionEvents(transport, session_id)
        self._path = f"/v1/sessions/{_seg(session_id)}"

    def __repr__(self) -> str:
        return f"SessionRef({self.id!r})"

    def turn(self, turn_id: str) -> TurnRef:
        return TurnRef(self._http, self.id, turn_id)

    async def retrieve(self) -> Session:
        return Session.model_validate(await self._http.request("GET", self._path))

    async def enqueue(self, input: JsonValue, *, idempotency_key: str | None = None) -> TurnRef:
        """Admits FIFO work; a repeated ``idempotency_key`` returns the same turn."""
        body: dict[str, Any] = {"input": input}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        turn = Turn.model_validate(
            await self._http.request("POST", self._path + "/turns", body=body)
        )
        return TurnRef(self._http, self.id, turn.id, turn)

    async def send(self, data: JsonValue) -> Sent:
        """Sends to the active turn before settlement, or enqueues when the session is idle."""
        reply = _SendReply.model_validate(
            await self._http.request("POST", self._path + "/send", body={"data": data})
        )
        return Sent(
            reply.kind, TurnRef(self._http, self.id, reply.turn.id, reply.turn), reply.message
        )

    async def interrupt(self) -> StopReceipt:
        """Stops the active turn and holds the session; queued work stays."""
        return StopReceipt.model_validate(
            await self._http.request("POST", self._path + "/interrupt", body={})
        )

    async def resume(self, *, hold_id: str) -> Session:
        """Releases exactly that hold; never replays the interrupted turn."""
        return await self._control("resume", {"hold_id": hold_id})

    async def cancel(self, *, idempotency_key: str | None = None) -> Session:
        """An acceptance: poll ``retrieve()`` for ``status == "closed"``."""
        body = {} if idempotency_key is None else {"idempotency_key": idempotency_key}
        return await self._control("cancel", body)

    async def close(self) -> Session:
        """Stops admission; accepted FIFO work drains, then the session closes."""
        return await self._control("close", {})

    async def _control(self, verb: str, body: dict[str, Any]) -> Session:
        return Session.model_validate(
            await self._http.request("POST", f"{self._path}/{verb}", body=body)
        )


class Sessions:
    def __init__(self, transport: Transport) -> None:
        self._http = transport

    def ref(self, session_id: str) -> SessionRef:
        return SessionRef(self._http, session_id)
