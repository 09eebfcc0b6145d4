"""The public REST API under ``/v1``: sessions, turns, messages, controls, events.

Each handler is one call into ``helmr.control.Control``; the state machine's
rules (FIFO, holds, exact-turn sends, idempotency) are Control's. What is here
is the HTTP shape, and the mirror: a session or turn admitted through the API
also gets its Kubernetes object, made by the operator's ``Mirror``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

from aiohttp import web
from ulid import ULID

from helmr.control.public_api import PublicControl
from helmr.events import Event, EventPage
from helmr.protocol import api_routes as routes
from helmr.protocol.api import (
    RunView,
    SendResult,
    SessionView,
    StartResult,
    StopReceipt,
    TurnView,
    TurnWaitView,
)
from helmr.protocol.api_requests import (
    MAX_PAGE,
    ActorPath,
    CancelBody,
    EnqueueBody,
    EventsQuery,
    ForkBody,
    NoBody,
    ResumeBody,
    SendBody,
    SessionPath,
    StartBody,
    StreamHeaders,
    StreamQuery,
    TurnPath,
    WaitQuery,
)
from helmr.resources.session import ForkFrom
from helmr.resources.session_env import SessionEnv
from helmr.server import sse
from helmr.server.routing import route
from helmr.server.traces import NoTraces, TurnTraceFacts
from helmr.states import TurnSource

log = logging.getLogger(__name__)

TAG = "sessions"

# Every route here is authorised as a Kubernetes user, with the verb it names.
public = partial(route, tag=TAG, access="public")


class Mirror(Protocol):
    """Makes the Kubernetes objects of what the API admitted (the operator implements it).

    Called after the store has committed, and again for an idempotent repeat,
    so it must create-if-absent. A failure does not fail the request: the
    admission is durable and the store is the authority (a client told "failed"
    would enqueue the work twice); it is logged, and a repeat heals it.
    """

    async def session_started(
        self, session: SessionView, env: SessionEnv, fork_from: ForkFrom | None = None
    ) -> None:
        """``env``: the settings the start named (they live in the Session's object only);
        ``fork_from``: the Session and Turn a fork started from (naming no settings, it
        runs with that Session's)."""

    async def turn_enqueued(self, session: SessionView, turn: TurnView) -> None: ...


class PublicApi:
    def __init__(
        self,
        control: PublicControl,
        mirror: Mirror | None,
        streams: sse.Streams,
        *,
        keepalive: float,
        traces: TurnTraceFacts | None = None,
    ) -> None:
        self._control = control
        self._mirror = mirror
        self._streams = streams
        self._keepalive = keepalive
        self._traces = traces or NoTraces()

    @public(
        "POST",
        routes.ACTOR_SESSIONS,
        verb="create",
        summary="Start a session of an actor.",
    )
    async def start_session(self, path: ActorPath, body: StartBody) -> StartResult:
        """Opens a session that owns the workspace. Start takes no input: enqueue work
        afterwards. A repeated idempotency_key returns the same session."""
        session = await self._control.open_session(
            namespace=path.namespace,
            # The Session object's name; the store makes the id (``ses_<ulid>``).
            name=f"ses-{str(ULID()).lower()}",
            actor=path.actor,
            workspace=body.workspace,
            key=body.key,
            idempotency_key=body.idempotency_key,
        )
        await self._mirrored(
            f"session {session.id}",
            lambda m: m.session_started(session, body.session_env()),
        )
        run = RunView(process_epoch=session.process_epoch) if session.process_live else None
        return StartResult(session=session, run=run)

    @public(
        "POST",
        routes.SESSION_FORK,
        verb="create",
        summary="Fork the session at a completed turn: a new session on a new workspace.",
    )
    async def fork_session(
        self, path: SessionPath, body: ForkBody, subject: SessionView
    ) -> StartResult:
        """The new session runs the same actor on a new workspace whose disk is restored
        from the save of ``at_turn``; the source is untouched and keeps running. It runs
        with the source's environment (``env``, ``env_from``) unless it names its own.
        409 save_not_ready while that save is being taken (fork again once it is); 409
        when the turn has no save of its own (saved with a later turn) or its save failed."""
        session = await self._control.fork_session(
            source_id=path.session_id,
            at_turn=body.at_turn,
            name=f"ses-{str(ULID()).lower()}",
            workspace=body.workspace or f"fork-{str(ULID()).lower()}",
            idempotency_key=body.idempotency_key,
        )
        # Its object names its source (spec.forkFrom): naming no settings of its own,
        # its runners get the source's, which live in the source's object only.
        source = ForkFrom(session=subject.name, turn=body.at_turn)
        await self._mirrored(
            f"session {session.id}",
            lambda m: m.session_started(session, body.session_env(), source),
        )
        return StartResult(session=session, run=None)

    @public("GET", routes.SESSION, verb="get", summary="Read a session.")
    async def get_session(self, path: SessionPath, subject: SessionView) -> SessionView:
        return subject

    @public(
        "POST",
        routes.SESSION_TURNS,
        verb="update",
        summary="Enqueue a turn (always FIFO work).",
        per_turn=True,
    )
    async def enqueue(self, path: SessionPath, body: EnqueueBody) -> TurnView:
        """A repeated idempotency_key returns the same turn. A held session still admits."""
        requested = datetime.now(UTC)
        # The Session comes with the admission (the guard need not read it: no subject).
        session, turn = await self._control.enqueue_answering_session(
            path.session_id, body.input, idempotency_key=body.idempotency_key, source=TurnSource.API
        )
        self._traces.admitted(turn, requested)
        await self._mirrored(f"turn {turn.id}", lambda m: m.turn_enqueued(session, turn))
        return turn

    @public("GET", routes.TURN, verb="get", summary="Read a turn.")
    async def get_turn(self, path: TurnPath) -> TurnView:
        return await self._control.get_turn(path.session_id, path.turn_id)

    @public(
        "GET",
        routes.TURN_WAIT,
        verb="get",
        summary="Wait for a turn's terminal status.",
        per_turn=True,
    )
    async def wait_turn(self, path: TurnPath, query: WaitQuery) -> TurnWaitView:
        """A timeout ends the wait, not the turn: the current view with timeout=true."""
        turn = await self._control.wait_turn(path.session_id, path.turn_id, query.timeout)
        return TurnWaitView(**dict(turn), timeout=not turn.terminal)

    @public(
        "POST",
        routes.SESSION_SEND,
        verb="update",
        summary="Send to the active turn, or enqueue when idle.",
    )
    async def send(self, path: SessionPath, body: SendBody, subject: SessionView) -> SendResult:
        """kind=messaged: the message went to the active turn (before settlement, even before
        its handler is registered). kind=enqueued: the session was idle and a new turn carries
        the data. A held session rejects send (409 session_held)."""
        requested = datetime.now(UTC)
        result = await self._control.send(path.session_id, body.data)
        if result.kind == "enqueued":
            turn = result.turn
            self._traces.admitted(turn, requested)
            await self._mirrored(f"turn {turn.id}", lambda m: m.turn_enqueued(subject, turn))
        return result

    @public(
        "POST",
        routes.TURN_SEND,
        verb="update",
        summary="Send a message to exactly this active turn.",
    )
    async def send_to_turn(self, path: TurnPath, body: SendBody) -> SendResult:
        """Returns a message receipt (kind=messaged), not proof of handling. 409 turn_not_active
        when the turn is not active, 409 turn_settling while it settles."""
        return await self._control.send(path.session_id, body.data, turn_id=path.turn_id)

    @public(
        "POST",
        routes.TURN_INTERRUPT,
        verb="update",
        summary="Interrupt exactly this running turn.",
    )
    async def interrupt_turn(self, path: TurnPath, body: NoBody) -> StopReceipt:
        """Holds the session like a session interrupt: queued work waits for resume with the
        receipt's hold_id. Acceptance may precede physical convergence: the turn stays
        running until its runner lets go of it."""
        return await self._control.interrupt(path.session_id, turn_id=path.turn_id)

    @public(
        "POST",
        routes.SESSION_INTERRUPT,
        verb="update",
        summary="Interrupt the session: stop the active turn and hold.",
    )
    async def interrupt(self, path: SessionPath, body: NoBody) -> StopReceipt:
        """Queued work stays; resume with the receipt's hold_id. Acceptance may precede
        physical convergence. A held session returns its hold."""
        return await self._control.interrupt(path.session_id)

    @public(
        "POST",
        routes.SESSION_RESUME,
        verb="update",
        summary="Release exactly this hold.",
    )
    async def resume(self, path: SessionPath, body: ResumeBody) -> SessionView:
        """Never replays the interrupted turn. 409 hold_mismatch for another hold,
        409 hold_not_converged while the interrupted turn is still stopping."""
        return await self._control.resume(path.session_id, body.hold_id)

    @public("POST", routes.SESSION_CANCEL, verb="update", summary="Cancel the session.")
    async def cancel(self, path: SessionPath, body: CancelBody) -> SessionView:
        """Rejects new input, cancels queued turns, interrupts the active one. An acceptance:
        poll the session for status closed. Cancelling is idempotent by state, so a repeat
        (with or without the idempotency_key) returns the same state."""
        return await self._control.cancel(path.session_id)

    @public(
        "POST",
        routes.SESSION_CLOSE,
        verb="update",
        summary="Close the session once its queued work drains.",
    )
    async def close(self, path: SessionPath, body: NoBody) -> SessionView:
        return await self._control.close(path.session_id)

    @public(
        "GET",
        routes.EVENTS,
        verb="get",
        summary="Read a page of the session's timeline.",
    )
    async def list_events(self, path: SessionPath, query: EventsQuery) -> EventPage:
        """A finite page is not a completion signal. Persist a sequence only after consuming
        its record; retained_after is the retention boundary."""
        return await self._control.list_events(path.session_id, query.after, query.limit)

    @public(
        "GET",
        routes.EVENTS_STREAM,
        verb="get",
        summary="Follow the session's timeline (server-sent events).",
        media_type=routes.STREAM_MEDIA_TYPE,
        stream_item=Event,
    )
    async def stream_events(
        self, request: web.Request, path: SessionPath, query: StreamQuery, headers: StreamHeaders
    ) -> web.StreamResponse:
        """Each record is an SSE message whose id is its sequence; resume from a cursor with
        `after` or Last-Event-ID (which wins). An `end` event follows the last record of a
        closed or failed session. Disconnecting stops observation only."""
        sid = path.session_id
        after = query.after if headers.last_event_id is None else headers.last_event_id

        async def page(cursor: int, wait: float) -> EventPage:
            return await self._control.wait_events(sid, cursor, wait, MAX_PAGE)

        async def ended() -> str | None:
            status = (await self._control.get_session(sid)).status
            return status if status in ("closed", "failed") else None

        timeline = sse.Timeline(page=page, ended=ended)
        return await sse.follow(
            request, timeline, after, keepalive=self._keepalive, streams=self._streams
        )

    async def _mirrored(self, what: str, create: Callable[[Mirror], Awaitable[None]]) -> None:
        if self._mirror is None:
            return
        try:
            await create(self._mirror)
        except Exception:
            log.exception("%s is admitted, but creating its Kubernetes object failed", what)
