"""The Session handle an actor's ``run`` gets: receive turns, write session-level output."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

from helmr import logs
from helmr.errors import HelmrError, InvalidInput, ReceiveTimeout, TurnNotActive
from helmr.protocol import (
    ActorSettings,
    CompleteRequest,
    FailRequest,
    NextReceive,
    ReceiveReply,
    ReceiveRequest,
    SessionClosed,
    Settled,
    TurnAssignment,
    contract,
    parse_receive_reply,
    routes,
)
from helmr.runner.output import Output
from helmr.runner.transport import Call, Transport
from helmr.runner.turn import Turn
from helmr.runner.wire import request

RECEIVE_WINDOW = 120.0
"""Seconds one ``receive`` request may wait. Each window is a request, and an idle
Session's only cost to the control plane: 5,000 idle Sessions renew 42 a second
(167 with 30 s windows). A connection that silently died (the control plane's
node went away) fails sooner, by TCP keepalive (``helmr.runner.http``)."""

HELD_SWEEP = 0.001
"""Seconds the ``receive`` after a held reply cut short may wait (``give_back``): it
only answers a turn already started for this process, not one to come (from
revision 6 it is asked not to start one: ``start: false``)."""

RECHECK = 1.0
"""Seconds between asking again while this process holds an unsettled turn, so a turn
the server ended without telling this process does not block ``receive`` forever."""


def _window(now: float, deadline: float | None, idle_end: float | None) -> float:
    """How long the next ``receive`` request may wait: a window, cut short by the
    caller's deadline and the idle end (not positive once the deadline passed)."""
    window = RECEIVE_WINDOW if deadline is None else min(deadline - now, RECEIVE_WINDOW)
    return window if idle_end is None else min(window, idle_end - now)


class Session:
    """This process's view of its Session."""

    def __init__(
        self,
        transport: Transport,
        *,
        idle_timeout: float | None = None,
        protocol: int = 1,
        settings: ActorSettings | None = None,
    ) -> None:
        """``protocol``: the runner protocol revision the control plane speaks
        (``HELMR_PROTOCOL``); what an older one lacks is refused here, never sent.
        ``settings``: what ``actor(...)`` declared, reported on the first receive
        (revision 2; an older control plane is told nothing)."""
        self.id = transport.session_id
        batch = routes.session_output_batch(self.id) if protocol >= 3 else None
        self.output = Output(transport.call, routes.session_output(self.id), batch)
        self._transport = transport
        self._idle_timeout = idle_timeout
        self._protocol = protocol
        self._unreported = settings if protocol >= 2 else None
        self._current: Turn | None = None
        self._received = asyncio.Event()  # set on each new turn (the stop listener waits)
        self._labels_asked: dict[str, Any] = {}  # of the actor's last receive
        self._window_asked = RECEIVE_WINDOW  # a held settlement's wait (revision 5)
        self._looping = False  # the actor asked for a turn after settling one
        # A receive request cut short (its caller cancelled) that no later one answered:
        # the server may have started a turn for it as it left.
        self._receive_cut = False
        # A settlement's reply (asked with ``next``), awaited by the next receive.
        self._started_next: tuple[asyncio.Task[Any], NextReceive] | None = None

    async def receive(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (the SDK's documented signature)
        idle_timeout: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
    ) -> Turn | None:
        """The next turn, or None once this process gets no more turns: the session
        is closing and has drained, or the process stayed idle (managed suspension).

        Waits up to ``timeout`` seconds (forever when None), then raises
        ``ReceiveTimeout``. ``idle_timeout`` overrides the process's (the control
        plane's, else the actor's): when no turn comes for that long, ``receive``
        returns None so that ``run`` returns and the process ends; the session
        stays open and its next turn starts a new process. Receiving never
        settles a turn: while this process holds an unsettled turn, ``receive``
        waits until it is settled.

        ``metadata`` (a JSON object) and ``tags`` (strings) are the application's
        own, recorded on the ``turn.running`` event of the turn this call starts
        (``data.metadata``, ``data.tags``); they need runner protocol 2.
        """
        labels = self._labels(metadata, tags)
        if self._current is not None and self._current.settled:
            self._looping = True
        self._labels_asked = labels
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        idle = self._idle_timeout if idle_timeout is None else idle_timeout
        idle_end = None if idle is None else loop.time() + idle
        self._window_asked = _window(0, None, idle)
        given = await self._given_with_settlement(labels, deadline)
        if given is not None:
            return (
                None
                if isinstance(given, SessionClosed)
                else self._start(given, self._unsettled_turn())
            )
        while True:
            now = loop.time()
            if idle_end is not None and idle_end <= now:
                # The server answered "no turn" for a wait that lasted until the
                # idle end, so no turn was given to this process: it may end.
                return None
            window = _window(now, deadline, idle_end)
            if window <= 0:
                raise ReceiveTimeout(f"no turn arrived within {timeout} s")
            reply = await self._ask(window, idle, labels)
            if reply is None:
                continue  # the server's window ended; our deadline decides
            if isinstance(reply, SessionClosed):
                return None
            current = self._unsettled_turn()
            if current is not None and current.id == reply.id:
                # The server still runs the turn this process holds: wait for the actor to
                # settle it, asking again now and then in case the server ends it.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(current._wait_settled(), min(RECHECK, window))
                if idle is not None:
                    idle_end = loop.time() + idle  # holding a turn is not being idle
                continue
            return self._start(reply, current)

    async def _ask(
        self,
        window: float,
        idle: float | None,
        labels: Mapping[str, Any],
        *,
        start: bool | None = None,
    ) -> ReceiveReply | None:
        """One ``receive`` request waiting up to ``window`` seconds; None when the
        server's window ended with no turn. ``start=False`` (revision 6): it starts
        none and waits for none."""
        body = request(
            ReceiveRequest,
            timeout=window,
            idle_timeout=idle,
            actor_settings=self._unreported,
            start=start,
            **labels,
        )
        try:
            reply = await self._transport.call(routes.receive(self.id), body, wait=window)
        except ReceiveTimeout:
            self._unreported = None  # the server took them before it waited
            self._receive_cut = False
            return None
        except asyncio.CancelledError:
            self._receive_cut = True
            raise
        self._unreported = None
        self._receive_cut = False
        return parse_receive_reply(reply)

    def _start(self, assignment: TurnAssignment, held: Turn | None) -> Turn:
        """The new turn ``assignment`` as this process's current one."""
        if held is not None:
            # A new turn means the server ended the one this process held.
            held.signal.abort("turn_not_active")
        self._current = Turn(
            assignment,
            self._transport.call,
            self.id,
            after=self if self._protocol >= 3 else None,
            batch_output=self._protocol >= 3,
        )
        # The actor's task logs about this turn from now on (helmr.logs).
        logs.bind(turn=assignment.id)
        self._received.set()
        return self._current

    def next_receive(self) -> NextReceive | None:
        """Asked as a turn settles (protocol 3): the actor's next ``receive``, to send
        with the settlement, once the actor has shown it asks for a turn after
        settling one (a ``run`` that settles one turn and returns asks for none).
        From protocol 5 it waits as that receive's first window would."""
        if not self._looping:
            return None
        timeout = self._window_asked if self._protocol >= 5 else None
        return NextReceive(**self._labels_asked, timeout=timeout)

    async def settle(
        self, call: Call, path: str, body: CompleteRequest | FailRequest, asked: NextReceive
    ) -> None:
        """Sends a settlement asking for the next turn (``asked``) and returns once it
        has committed: its reply's head has come (with protocol 5 the body may be held
        until a turn comes). The reply is the actor's next ``receive``'s to await."""
        loop = asyncio.get_running_loop()
        committed = loop.create_future()

        def heard(status: int) -> None:
            if status < 300 and not committed.done():
                committed.set_result(None)

        wait = 0.0 if asked.timeout is None else asked.timeout
        reply = loop.create_task(call(path, body, wait=wait, heard=heard))
        try:
            await asyncio.wait((committed, reply), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            reply.cancel()  # the settlement with it: the actor may try again
            raise
        if not committed.done():
            reply.result()  # the settlement's error (a reply that came whole was heard)
        self._started_next = (reply, asked)

    async def _given_with_settlement(
        self, labels: Mapping[str, Any], deadline: float | None
    ) -> ReceiveReply | None:
        """The turn (or end) a settlement's ``next`` got, if this receive may take it:
        a turn started with other labels than this receive's goes back (``release``).
        A reply still held is awaited until ``deadline`` (then ReceiveTimeout; it is
        kept for the next receive)."""
        given = self._started_next
        if given is None:
            return None
        reply, asked = given
        if not reply.done():
            now = asyncio.get_running_loop().time()
            await asyncio.wait((reply,), timeout=None if deadline is None else deadline - now)
            if not reply.done():
                raise ReceiveTimeout("no turn arrived within the receive's timeout")
        self._started_next = None
        started = _next_of(reply)
        if started is None or isinstance(started, SessionClosed):
            return started
        if asked == NextReceive(**labels, timeout=asked.timeout):
            return started
        await self._release(started)
        return None

    def ask_no_more(self) -> None:
        """From now on settlements ask for no next turn: ``run`` ended, or is ending."""
        self._looping = False

    async def give_back(self) -> None:
        """Releases the turn a settlement started that the actor never got (its
        ``run`` ended): it runs next, on another process. A reply still held is cut
        short first: the server starts no turn for a reply no one waits for, but a
        wait woken as the connection closed may have, and a ``receive`` answers that
        turn to give back. From revision 6 that receive starts nothing (``start:
        false``): a turn queued meanwhile stays queued, never started for this
        ending process only to go back (an older control plane starts the queue's
        head, which goes back likewise). So, from revision 6, does a ``receive``
        cut short (SIGTERM cancels ``run`` as it waits): a wait woken as it left may
        have started a turn, which would otherwise stay ``running`` for a process
        gone. The turn the actor holds is never given back."""
        given, self._started_next = self._started_next, None
        if given is None:
            # A receive cut short (SIGTERM cancelled ``run`` as it waited) may have had a
            # turn started as it left: asked only of a control plane of revision 6, as
            # an older one would start the queue's head to answer.
            cut = self._receive_cut and self._protocol >= 6
            started = await self._ask_started() if cut else None
        elif given[0].done():
            started = _next_of(given[0])
        else:
            given[0].cancel()
            await asyncio.wait((given[0],))  # its connection closed before the receive
            started = await self._ask_started()
        held = self._unsettled_turn()
        if isinstance(started, TurnAssignment) and (held is None or held.id != started.id):
            await self._release(started)

    async def _ask_started(self) -> ReceiveReply | None:
        """The turn already started for this process, which its actor never got; from
        revision 6 it starts none (``start: false``), before that the queue's head."""
        start = False if self._protocol >= 6 else None
        return await self._ask(HELD_SWEEP, None, self._labels_asked, start=start)

    async def _release(self, assignment: TurnAssignment) -> None:
        # TurnNotActive: a stop was accepted meanwhile; it converges as this process lets go.
        with contextlib.suppress(TurnNotActive):
            await self._transport.call(routes.release(self.id, assignment.id))

    def _labels(
        self, metadata: Mapping[str, Any] | None, tags: Iterable[str] | None
    ) -> dict[str, Any]:
        """``receive``'s ``metadata`` and ``tags`` as the request's fields; InvalidInput
        naming the argument for a wrong type."""
        labels: dict[str, Any] = {}
        if metadata is not None:
            if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
                raise InvalidInput("receive(metadata=...): give a JSON object (str keys)")
            labels["metadata"] = dict(metadata)
        if tags is not None:
            listed = [] if isinstance(tags, str) else list(tags)
            if isinstance(tags, str) or not all(isinstance(t, str) for t in listed):
                raise InvalidInput("receive(tags=...): give a list of strings")
            labels["tags"] = listed
        if labels:
            self._require_protocol(2, "receive(metadata=..., tags=...)")
        return labels

    async def cancel(self) -> None:
        """Cancels this Session, as ``client.sessions.ref(id).cancel()`` does (spec/001:
        "Cancellation also works through a runtime Session reference inside an Actor").

        Returns once the control plane accepted it: new input is refused, queued
        turns are ``cancelled``, and the turn this process holds is stopped (its
        ``signal`` is set, ``stop_requested``) and ends ``interrupted`` (reason
        ``cancel``) once this process lets go of it; ``receive`` then returns None
        and the process is stopped. The Session is ``closed`` (how ``cancel``) once
        this process is gone. Cancelling again changes nothing.
        """
        self._require_protocol(2, "session.cancel()")
        await self._transport.call(routes.cancel(self.id))

    def _require_protocol(self, revision: int, what: str) -> None:
        if self._protocol < revision:
            raise HelmrError(
                f"{what} needs runner protocol {revision}; this control plane speaks"
                f" {self._protocol} ({contract.ENV_PROTOCOL}): upgrade Helmr's control plane"
            )

    async def next_unsignalled_turn(self) -> Turn:
        """The turn this process holds unsettled with its signal not set, once there is one."""
        while True:
            current = self._unsettled_turn()
            if current is not None and not current.signal.aborted:
                return current
            self._received.clear()
            await self._received.wait()

    def _unsettled_turn(self) -> Turn | None:
        """The turn this process received and has not settled, if any."""
        current = self._current
        return current if current is not None and not current.settled else None


def _next_of(reply: asyncio.Task[Any]) -> ReceiveReply | None:
    """What a settlement's finished reply says of the next turn; None for none yet,
    or when the reply failed after the settlement had committed (a connection lost
    for good, the process fenced): the ``receive`` that follows hears why."""
    if reply.cancelled() or reply.exception() is not None:
        return None
    return Settled.from_json(reply.result()).next
