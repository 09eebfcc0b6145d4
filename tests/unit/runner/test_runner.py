"""The actor SDK against a fake of the runner protocol.

``FakeControlPlane`` serves the runner routes from memory, parsing every body
with the ``helmr.protocol`` models the real server uses, and keeps the
protocol's promises (an unsettled turn is answered again by ``receive``, the
oldest unstarted message by ``messages/next``). It is a fake of the wire
protocol only; the control plane's behaviour is tested elsewhere.

Waiting is always for a state of the fake (``plane.until``), never a sleep
whose length decides the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from helmr import logs
from helmr.errors import (
    Conflict,
    HelmrError,
    InvalidInput,
    MessageRejected,
    NotFound,
    ReceiveTimeout,
    StaleEpoch,
    TurnNotActive,
    Unauthenticated,
)
from helmr.protocol import (
    EPOCH_HEADER,
    ActorSettings,
    CompleteRequest,
    ExitCode,
    FailRequest,
    MessageOutcome,
    MessageOutcomeRequest,
    NextMessageRequest,
    OutputRequest,
    ReceiveRequest,
    RespondRequest,
    contract,
    routes,
)
from helmr.runner import Message, Session, Turn, actor
from helmr.runner.entrypoint import read_token
from helmr.runner.session import RECEIVE_WINDOW
from helmr.runner.transport import Transport
from helmr.server.inputs import parse

SID = "ses_01TEST"
TOKEN = "runner-token"
EPOCH = 3

# A hook runs before a route's own handling; a response it returns replaces that handling.
Hook = Callable[[web.Request, dict[str, Any]], Awaitable[web.StreamResponse | None]]


def assignment(turn_id: str, sequence: int, input: Any) -> dict[str, Any]:
    return {
        "id": turn_id,
        "sequence": sequence,
        "input": input,
        "source": "api",
        "created_at": "2024-05-01T12:00:00Z",
    }


class FakeControlPlane:
    def __init__(self) -> None:
        self.url = ""
        self.turns: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (route name, body), in arrival order
        self.outputs: dict[str, tuple[str | None, Any]] = {}  # key → (turn id or None, value)
        self.responses: dict[str, Any] = {}
        self.settled: dict[str, tuple[str, dict[str, Any]]] = {}  # turn id → (route, body)
        self.pending: dict[str, list[dict[str, Any]]] = defaultdict(list)  # unstarted messages
        self.outcomes: list[tuple[str, str, str | None]] = []  # (message id, outcome, reason)
        self.hooks: dict[str, Hook] = {}
        self._active: dict[str, Any] | None = None
        self._changed = asyncio.Condition()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        for name, pattern, handler in [
            ("receive", routes.RECEIVE, self._receive),
            ("session_output", routes.SESSION_OUTPUT, self._output),
            ("turn_output", routes.TURN_OUTPUT, self._output),
            ("respond", routes.RESPOND, self._respond),
            ("complete", routes.COMPLETE, self._settle),
            ("fail", routes.FAIL, self._settle),
            ("ready", routes.MESSAGES_READY, self._ready),
            ("next", routes.MESSAGES_NEXT, self._next),
            ("outcome", routes.MESSAGE_OUTCOME, self._outcome),
        ]:
            app.router.add_post(pattern, handler, name=name)
        return app

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(predicate)

    async def add_message(self, turn_id: str, message_id: str, data: Any) -> None:
        async with self._changed:
            self.pending[turn_id].append({"id": message_id, "data": data})
            self._changed.notify_all()

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        name = request.match_info.route.name or "?"
        body: dict[str, Any] = await request.json()
        try:
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                raise Unauthenticated("wrong runner token")
            if request.match_info.get("session_id") != SID:
                raise NotFound("no such session")
            if request.headers.get(EPOCH_HEADER) != str(EPOCH):
                raise StaleEpoch("fenced")
            async with self._changed:
                self.calls.append((name, body))
                self._changed.notify_all()
            hook = self.hooks.get(name)
            replaced = await hook(request, body) if hook is not None else None
            response = replaced if replaced is not None else await handler(request)
        except HelmrError as e:
            response = web.json_response(e.to_json(), status=e.status)
        async with self._changed:
            self._changed.notify_all()
        return response

    async def _receive(self, request: web.Request) -> web.Response:
        ask = parse(ReceiveRequest, await request.json(), "body")
        if self._active is not None and self._active["id"] not in self.settled:
            return web.json_response(self._active)  # the protocol's promise: same turn again
        try:
            item = await asyncio.wait_for(self.turns.get(), ask.timeout)
        except TimeoutError:
            raise ReceiveTimeout("no turn in this window") from None
        if "id" in item:
            self._active = item
        return web.json_response(item)

    async def _output(self, request: web.Request) -> web.Response:
        body = parse(OutputRequest, await request.json(), "body")
        self._check_active(request)
        turn_id = request.match_info.get("turn_id")
        self.outputs.setdefault(body.idempotency_key, (turn_id, body.value))
        return web.json_response({"ok": True})

    async def _respond(self, request: web.Request) -> web.Response:
        body = parse(RespondRequest, await request.json(), "body")
        self._check_active(request)
        self.responses[request.match_info["turn_id"]] = body.value
        return web.json_response({"ok": True})

    async def _settle(self, request: web.Request) -> web.Response:
        raw = await request.json()
        name = request.match_info.route.name or "?"
        if name == "complete":
            parse(CompleteRequest, raw, "body")
        else:
            parse(FailRequest, raw, "body")
        turn_id = request.match_info["turn_id"]
        if self.settled.get(turn_id, (name, raw)) != (name, raw):
            raise TurnNotActive("settled otherwise")
        self.settled[turn_id] = (name, raw)
        return web.json_response({"ok": True})

    async def _ready(self, request: web.Request) -> web.Response:
        self._check_active(request)
        return web.json_response({"ok": True})

    async def _next(self, request: web.Request) -> web.Response:
        ask = parse(NextMessageRequest, await request.json(), "body")
        turn_id = request.match_info["turn_id"]
        self._check_active(request)
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: bool(self.pending[turn_id])), ask.timeout
                )
            first = self.pending[turn_id][0] if self.pending[turn_id] else None
        return web.json_response({"message": first})

    async def _outcome(self, request: web.Request) -> web.Response:
        body = parse(MessageOutcomeRequest, await request.json(), "body")
        outcome = MessageOutcome(request.match_info["outcome"])
        turn_id, message_id = request.match_info["turn_id"], request.match_info["message_id"]
        if outcome is MessageOutcome.STARTED:
            self.pending[turn_id] = [m for m in self.pending[turn_id] if m["id"] != message_id]
        self.outcomes.append((message_id, outcome.value, body.reason))
        return web.json_response({"ok": True})

    def _check_active(self, request: web.Request) -> None:
        # A settling turn is active until its started handlers have reported.
        turn_id = request.match_info.get("turn_id")
        if turn_id is not None and turn_id in self.settled and not self._handling():
            raise TurnNotActive(f"turn {turn_id} is settled")

    def _handling(self) -> set[str]:
        """The messages whose handler started and has not reported its outcome."""
        started = {m for m, outcome, _ in self.outcomes if outcome == "started"}
        return started - {m for m, outcome, _ in self.outcomes if outcome != "started"}


@pytest.fixture
async def plane() -> AsyncIterator[FakeControlPlane]:
    fake = FakeControlPlane()
    server = TestServer(fake.app())
    await server.start_server()
    fake.url = str(server.make_url("/"))
    yield fake
    await server.close()


@pytest.fixture
def fenced() -> list[bool]:
    return []


@pytest.fixture
async def session(plane: FakeControlPlane, fenced: list[bool]) -> AsyncIterator[Session]:
    transport = Transport(
        plane.url,
        SID,
        lambda: TOKEN,
        EPOCH,
        on_fenced=lambda: fenced.append(True),
        retry_for=5.0,
    )
    async with transport:
        yield Session(transport)


async def first_turn(plane: FakeControlPlane, session: Session, input: Any = "hi") -> Turn:
    await plane.turns.put(assignment("turn_1", 1, input))
    turn = await session.receive()
    assert turn is not None
    return turn


async def test_a_turn_carries_its_assignment(plane: FakeControlPlane, session: Session) -> None:
    turn = await first_turn(plane, session, {"issue": "APP-42"})

    assert (turn.id, turn.sequence, turn.input, turn.source) == (
        "turn_1",
        1,
        {"issue": "APP-42"},
        "api",
    )
    assert turn.created_at.year == 2024
    assert not turn.signal.aborted
    assert plane.calls[0] == ("receive", {"timeout": RECEIVE_WINDOW, "idle_timeout": None})


async def test_complete_without_result_differs_from_complete_with_null(
    plane: FakeControlPlane, session: Session
) -> None:
    no_result = await first_turn(plane, session)
    await no_result.complete()
    await plane.turns.put(assignment("turn_2", 2, "again"))
    null_result = await session.receive()
    assert null_result is not None
    await null_result.complete(None)

    assert plane.settled == {
        "turn_1": ("complete", {}),
        "turn_2": ("complete", {"result": None}),
    }
    assert no_result.settled
    assert null_result.settled


async def test_fail_sends_a_code_and_message(plane: FakeControlPlane, session: Session) -> None:
    turn = await first_turn(plane, session)
    await turn.fail(ValueError("bad input"))
    assert plane.settled["turn_1"] == (
        "fail",
        {"error": {"code": "actor_error", "message": "bad input"}},
    )


async def test_a_turn_settles_once(plane: FakeControlPlane, session: Session) -> None:
    turn = await first_turn(plane, session)
    await turn.complete({"ok": True})
    with pytest.raises(Conflict):
        await turn.fail("too late")
    assert plane.names().count("complete") == 1
    assert "fail" not in plane.names()


async def test_output_respond_and_result_are_separate(
    plane: FakeControlPlane, session: Session
) -> None:
    turn = await first_turn(plane, session)
    await turn.output.write("Checking the build")
    await turn.respond("The build is green.")
    await turn.complete({"status": "green"})

    assert [v for _, v in plane.outputs.values()] == ["Checking the build"]
    assert plane.responses == {"turn_1": "The build is green."}
    assert plane.settled["turn_1"] == ("complete", {"result": {"status": "green"}})


async def test_settlement_waits_for_started_output(
    plane: FakeControlPlane, session: Session
) -> None:
    order: list[str] = []

    async def slow_output(request: web.Request, body: dict[str, Any]) -> None:
        order.append("output arrived")
        # A settlement that did not wait would arrive now; give it the chance.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(plane.until(lambda: "complete" in plane.names()), 0.3)
        order.append("output done")

    async def note_complete(request: web.Request, body: dict[str, Any]) -> None:
        order.append("complete arrived")

    plane.hooks.update(turn_output=slow_output, complete=note_complete)
    turn = await first_turn(plane, session)
    turn.output.write("not awaited")  # started, then left running
    await turn.complete()

    assert order == ["output arrived", "output done", "complete arrived"]
    assert [v for _, v in plane.outputs.values()] == ["not awaited"]


async def test_output_is_recorded_in_the_order_it_was_started(
    plane: FakeControlPlane, session: Session
) -> None:
    async def hold_the_first(request: web.Request, body: dict[str, Any]) -> None:
        if body["value"] == 0:
            # A later write that did not wait for this one would arrive now.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    plane.until(lambda: plane.names().count("turn_output") > 1), 0.3
                )

    plane.hooks["turn_output"] = hold_the_first
    turn = await first_turn(plane, session)
    for n in range(5):
        turn.output.write(n)
    await turn.output.pipe(["a", "b"])

    async def more() -> AsyncIterator[str]:
        yield "c"
        yield "d"

    await turn.output.pipe(more())

    assert [v for _, v in plane.outputs.values()] == [0, 1, 2, 3, 4, "a", "b", "c", "d"]
    # The end of a stream settles nothing.
    assert "complete" not in plane.names()
    assert not turn.settled


async def test_session_output_is_not_turn_output(plane: FakeControlPlane, session: Session) -> None:
    await session.output.write({"note": "session-level"})
    assert list(plane.outputs.values()) == [(None, {"note": "session-level"})]


async def test_a_value_that_is_not_json_is_refused_before_sending(
    plane: FakeControlPlane, session: Session
) -> None:
    turn = await first_turn(plane, session)
    with pytest.raises(InvalidInput):
        turn.output.write({1, 2})
    assert "turn_output" not in plane.names()
    assert not turn.settled


async def test_an_invalid_result_fails_the_turn(plane: FakeControlPlane, session: Session) -> None:
    """000: "`failed`: The handler threw, returned an invalid result or broke the Turn
    contract": ``complete`` with a result that is not JSON fails it, ``invalid_result``."""
    turn = await first_turn(plane, session)
    await turn.complete(object())
    assert turn.settled
    name, body = plane.settled["turn_1"]
    assert (name, body["error"]["code"]) == ("fail", "invalid_result")
    assert "result" in body["error"]["message"]  # says what was wrong with it
    assert "complete" not in plane.names()


async def test_a_retried_write_carries_the_same_idempotency_key(
    plane: FakeControlPlane, session: Session
) -> None:
    attempts: list[str] = []

    async def lose_first_reply(request: web.Request, body: dict[str, Any]) -> None:
        attempts.append(body["idempotency_key"])
        if len(attempts) == 1:
            await plane._output(request)  # recorded by the server...
            assert request.transport is not None
            request.transport.close()  # ...but the reply never reaches the runner

    plane.hooks["turn_output"] = lose_first_reply
    turn = await first_turn(plane, session)
    await turn.output.write("once")
    await turn.output.write("mine", idempotency_key="caller-key")

    assert len(attempts) == 3
    assert attempts[0] == attempts[1]
    assert attempts[2] == "caller-key"
    assert [v for _, v in plane.outputs.values()] == ["once", "mine"]


async def test_receive_timeout_raises(plane: FakeControlPlane, session: Session) -> None:
    with pytest.raises(ReceiveTimeout):
        await session.receive(timeout=0.2)
    asked = [body for name, body in plane.calls if name == "receive"]
    assert asked
    assert all(0 < body["timeout"] <= 0.2 for body in asked)


async def test_a_server_window_ending_is_not_a_timeout(
    plane: FakeControlPlane, session: Session
) -> None:
    async def short_window(request: web.Request, body: dict[str, Any]) -> None:
        if plane.names().count("receive") == 1:
            raise ReceiveTimeout("the server cut this window short")
        await plane.turns.put(assignment("turn_1", 1, "late"))

    plane.hooks["receive"] = short_window
    turn = await session.receive(idle_timeout=2 * RECEIVE_WINDOW)

    assert turn is not None
    assert turn.input == "late"
    assert [body for name, body in plane.calls] == [
        {"timeout": RECEIVE_WINDOW, "idle_timeout": 2 * RECEIVE_WINDOW}
    ] * 2


async def test_a_drained_closing_session_receives_none(
    plane: FakeControlPlane, session: Session
) -> None:
    await plane.turns.put({"closed": True})
    assert await session.receive() is None


async def test_an_idle_process_receives_none_once_its_idle_timeout_passes(
    plane: FakeControlPlane, session: Session
) -> None:
    assert await session.receive(idle_timeout=0.3) is None
    asked = [body for name, body in plane.calls if name == "receive"]
    assert asked
    # Every wait ended at the idle end: the server answered "no turn" for all of it.
    assert all(0 < body["timeout"] <= 0.3 for body in asked)
    assert sum(body["timeout"] for body in asked) >= 0.3 - 0.05


async def test_a_turn_within_the_idle_timeout_is_received(
    plane: FakeControlPlane, session: Session
) -> None:
    async def first_window_empty(request: web.Request, body: dict[str, Any]) -> None:
        if plane.names().count("receive") == 1:
            raise ReceiveTimeout("nothing yet")
        await plane.turns.put(assignment("turn_1", 1, "in time"))

    plane.hooks["receive"] = first_window_empty
    turn = await session.receive(idle_timeout=60)
    assert turn is not None
    assert turn.input == "in time"


async def test_a_receive_timeout_before_the_idle_end_still_raises(
    plane: FakeControlPlane, session: Session
) -> None:
    with pytest.raises(ReceiveTimeout):
        await session.receive(timeout=0.2, idle_timeout=60)


async def test_receiving_again_never_settles_the_held_turn(
    plane: FakeControlPlane, session: Session
) -> None:
    held = await first_turn(plane, session)
    await plane.turns.put(assignment("turn_2", 2, "next"))
    following = asyncio.create_task(session.receive())
    # The server answers the held turn again; the runner must wait, not settle it.
    await plane.until(lambda: plane.names().count("receive") >= 2)
    assert not held.settled
    assert "complete" not in plane.names()

    await held.complete()
    nxt = await following

    assert nxt is not None
    assert nxt.id == "turn_2"
    assert plane.names()[-2:] == ["complete", "receive"]


async def test_messages_are_delivered_in_order_with_their_outcomes(
    plane: FakeControlPlane, session: Session
) -> None:
    turn = await first_turn(plane, session)
    for n in range(1, 5):
        # Accepted before the handler registers: delivered once it is ready.
        await plane.add_message("turn_1", f"msg_{n}", {"n": n})
    seen: list[Any] = []
    running = 0

    async def handler(message: Message) -> None:
        nonlocal running
        running += 1
        assert running == 1, "handlers overlapped"
        await asyncio.sleep(0)
        running -= 1
        assert isinstance(message.data, dict)
        n = message.data["n"]
        seen.append(n)
        if n == 2:
            raise MessageRejected("not now")
        if n == 3:
            raise ValueError("broken")

    await turn.on_message(handler)
    await plane.until(lambda: len(plane.outcomes) == 8)
    await turn.complete()

    assert seen == [1, 2, 3, 4]
    assert plane.outcomes == [
        ("msg_1", "started", None),
        ("msg_1", "delivered", None),
        ("msg_2", "started", None),
        ("msg_2", "rejected", "not now"),
        ("msg_3", "started", None),
        ("msg_3", "unknown", "ValueError: broken"),
        ("msg_4", "started", None),
        ("msg_4", "delivered", None),
    ]
    assert plane.names().index("ready") < plane.names().index("next")


async def test_settlement_is_told_before_the_message_handler_in_progress_returns(
    plane: FakeControlPlane, session: Session
) -> None:
    """The server refuses sends from then on (turn_settling), and commits the outcome
    once the handler reports; ``complete`` returns after that report."""
    turn = await first_turn(plane, session)
    await plane.add_message("turn_1", "msg_1", "approve")
    order: list[str] = []
    handling = asyncio.Event()

    async def handler(message: Message) -> None:
        order.append("handler started")
        handling.set()
        await plane.until(lambda: "complete" in plane.names())
        turn.output.write(f"handled {message.data}")  # recorded before the report
        order.append("handler done")

    async def note(request: web.Request, body: dict[str, Any]) -> None:
        order.append(request.match_info.route.name or "?")

    plane.hooks["complete"] = plane.hooks["outcome"] = plane.hooks["turn_output"] = note
    await turn.on_message(handler)
    await handling.wait()
    await turn.complete()

    assert order[order.index("handler started") :] == [
        "handler started",
        "complete",
        "handler done",
        "turn_output",
        "outcome",
    ]
    assert [v for _, v in plane.outputs.values()] == ["handled approve"]
    assert plane.outcomes[-1] == ("msg_1", "delivered", None)


async def test_settling_leaves_a_message_not_yet_started_to_the_server(
    plane: FakeControlPlane, session: Session
) -> None:
    turn = await first_turn(plane, session)
    handled: list[Any] = []

    async def handler(message: Message) -> None:
        handled.append(message.data)

    await turn.on_message(handler)
    await plane.until(lambda: "next" in plane.names())
    await turn.complete()

    assert handled == []
    assert plane.outcomes == []
    assert plane.settled["turn_1"] == ("complete", {})


async def test_one_message_handler_per_turn(plane: FakeControlPlane, session: Session) -> None:
    turn = await first_turn(plane, session)

    async def handler(message: Message) -> None:
        pass

    await turn.on_message(handler)
    with pytest.raises(Conflict):
        await turn.on_message(handler)
    await turn.complete()
    assert plane.names().count("ready") == 1


async def test_a_handler_cannot_settle_its_own_turn(
    plane: FakeControlPlane, session: Session
) -> None:
    turn = await first_turn(plane, session)
    await plane.add_message("turn_1", "msg_1", "done")
    errors: list[Exception] = []

    async def handler(message: Message) -> None:
        try:
            await turn.complete()
        except Conflict as e:
            errors.append(e)

    await turn.on_message(handler)
    await plane.until(lambda: ("msg_1", "delivered", None) in plane.outcomes)
    await turn.complete()

    assert len(errors) == 1
    assert plane.settled["turn_1"] == ("complete", {})


async def test_a_turn_the_server_ended_sets_the_signal(
    plane: FakeControlPlane, session: Session
) -> None:
    async def interrupted(request: web.Request, body: dict[str, Any]) -> None:
        raise TurnNotActive("the turn was interrupted")

    plane.hooks["turn_output"] = interrupted
    turn = await first_turn(plane, session)
    with pytest.raises(TurnNotActive):
        await turn.output.write("too late")

    assert turn.signal.aborted
    assert await turn.signal.wait() == "turn_not_active"
    assert turn.settled


async def test_a_stale_epoch_fences_the_process(
    plane: FakeControlPlane, session: Session, fenced: list[bool]
) -> None:
    async def newer_process_runs(request: web.Request, body: dict[str, Any]) -> None:
        raise StaleEpoch("a newer process runs this session")

    plane.hooks["turn_output"] = newer_process_runs
    turn = await first_turn(plane, session)
    with pytest.raises(StaleEpoch):
        await turn.output.write("first")
    calls = len(plane.calls)
    with pytest.raises(StaleEpoch):
        await turn.output.write("second")
    with pytest.raises(StaleEpoch):
        await turn.complete()

    assert fenced == [True]
    assert len(plane.calls) == calls  # nothing more reached the server
    assert plane.outputs == {}


async def test_the_server_checks_token_and_epoch(plane: FakeControlPlane) -> None:
    fenced: list[bool] = []
    async with Transport(
        plane.url, SID, lambda: "wrong", EPOCH, on_fenced=lambda: None
    ) as transport:
        with pytest.raises(Unauthenticated):
            await Session(transport).receive()
    async with Transport(
        plane.url, SID, lambda: TOKEN, EPOCH - 1, on_fenced=lambda: fenced.append(True)
    ) as transport:
        with pytest.raises(StaleEpoch):
            await Session(transport).receive()
    assert fenced == [True]


async def test_every_call_sends_the_token_file_as_it_is_now(
    plane: FakeControlPlane, tmp_path: Path
) -> None:
    # The kubelet replaces a projected token before it expires: a long-lived
    # process must send the new one, not the one it started with.
    token_file = tmp_path / "token"
    token_file.write_text("expired\n")
    async with Transport(
        plane.url, SID, partial(read_token, str(token_file)), EPOCH, on_fenced=lambda: None
    ) as transport:
        session = Session(transport)
        with pytest.raises(Unauthenticated):
            await session.receive()
        token_file.write_text(TOKEN + "\n")
        await plane.turns.put(assignment("turn_1", 1, "hi"))
        turn = await session.receive()
    assert turn is not None
    assert turn.input == "hi"


async def test_an_actor_definition_holds_its_settings() -> None:
    async def run(session: Session) -> None:
        pass

    reviewer = actor(id="reviewer", run=run, idle_timeout=60, queue=10, ttl=3600.0, retry=3)
    assert (reviewer.id, reviewer.run, reviewer.idle_timeout, reviewer.ttl) == (
        "reviewer",
        run,
        60,
        3600,
    )
    assert isinstance(reviewer.ttl, int)  # whole seconds, as the manifest's ttlSeconds
    with pytest.raises(InvalidInput):
        actor(id="", run=run)


async def _run(session: Session) -> None:
    pass


@pytest.mark.parametrize(
    ("setting", "value", "field"),
    [
        ("max_duration", 0, "maxDurationSeconds"),
        ("max_duration", 2_592_001, "maxDurationSeconds"),
        ("max_duration", 0.5, "maxDurationSeconds"),
        ("ttl", 0, "ttlSeconds"),
        ("ttl", -1, "ttlSeconds"),
        ("ttl", float("inf"), "ttlSeconds"),
        ("queue", 10_001, "queueLimit"),
        ("queue", True, "queueLimit"),
        ("retry", 11, "retry.maxAttempts"),
        ("retry", "3", "retry.maxAttempts"),
        ("idle_timeout", 0.5, "idleTimeoutSeconds"),
        ("idle_timeout", float("nan"), "idleTimeoutSeconds"),
    ],
)
async def test_a_setting_the_control_plane_cannot_honour_is_refused_naming_it(
    setting: str, value: object, field: str
) -> None:
    """Each setting is the Actor manifest field of the same meaning: outside its
    range it could never take effect, so it is refused, never ignored."""
    with pytest.raises(InvalidInput, match=rf"actor\({setting}=.*spec\.{field}") as refused:
        actor(id="reviewer", run=_run, **{setting: value})  # type: ignore[arg-type]
    assert refused.value.details == {"setting": setting}


async def test_what_the_code_declares_is_reported_as_the_manifest_s_fields() -> None:
    declared = actor(id="a", run=_run, queue=5, max_duration=600, ttl=60, retry=2, idle_timeout=9)
    assert declared.settings() == ActorSettings(
        queue=5, max_duration=600, ttl=60, retry=2, idle_timeout=9
    )
    assert actor(id="a", run=_run).settings() is None  # nothing to report


# The entrypoint, ``python -m helmr.runner``, as the runner pod runs it.

REPO = Path(__file__).resolve().parents[3]

ACTORS = """
import asyncio
import logging

from helmr.runner import actor


async def finish(session):
    while (turn := await session.receive()) is not None:
        await turn.complete({"done": turn.input})


async def explode(session):
    turn = await session.receive()
    await turn.output.write("before")
    raise RuntimeError("exploded")


async def forget_to_settle(session):
    turn = await session.receive()
    await turn.output.write("working")


async def keep_writing(session):
    turn = await session.receive()
    for n in range(10):
        try:
            await turn.output.write(n)
        except Exception:
            pass  # even an actor that swallows errors must not outlive its fencing


async def log_and_finish(session):
    turn = await session.receive()
    logging.getLogger("actors").info("working on %s", turn.input)
    await turn.complete()


async def ignore(message):
    pass


async def wait_for_stop(session):
    turn = await session.receive()
    await turn.on_message(ignore)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await turn.output.write({"signal": turn.signal.reason})
        raise


finishes = actor(id="finishes", run=finish)
explodes = actor(id="explodes", run=explode)
forgets_to_settle = actor(id="forgets-to-settle", run=forget_to_settle)
keeps_writing = actor(id="keeps-writing", run=keep_writing)
logs_and_finishes = actor(id="logs-and-finishes", run=log_and_finish)
waits_for_stop = actor(id="waits-for-stop", run=wait_for_stop)
declares = actor(id="declares", run=finish, queue=5, ttl=60)
not_an_actor = finish
"""

StartRunner = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
def start_runner(plane: FakeControlPlane, tmp_path: Path) -> StartRunner:
    (tmp_path / "actors.py").write_text(ACTORS)
    (tmp_path / "token").write_text(TOKEN + "\n")

    async def start(entrypoint: str, **overrides: str) -> asyncio.subprocess.Process:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELMR_")}
        env.update(
            {
                contract.ENV_URL: plane.url,
                contract.ENV_SESSION_ID: SID,
                contract.ENV_TOKEN_FILE: str(tmp_path / "token"),
                contract.ENV_PROCESS_EPOCH: str(EPOCH),
                contract.ENV_ENTRYPOINT: entrypoint,
                # The parent's path last: the runner is the checkout's under test.
                "PYTHONPATH": os.pathsep.join(
                    filter(
                        None,
                        [
                            str(tmp_path),
                            str(REPO / "examples"),
                            str(REPO / "tests" / "actors"),
                            os.environ.get("PYTHONPATH"),
                        ],
                    )
                ),
                **overrides,
            }
        )
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "helmr.runner", env=env, stderr=asyncio.subprocess.PIPE
        )

    return start


async def exit_code(process: asyncio.subprocess.Process) -> int:
    # The bound only stops a hung runner from hanging the suite; no outcome depends on it.
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    print(stderr.decode())  # shown by pytest when the test fails
    assert process.returncode is not None
    return process.returncode


async def test_the_process_exits_0_when_run_returns(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, "a"))
    await plane.turns.put({"closed": True})

    assert await exit_code(await start_runner("actors:finishes")) == ExitCode.OK
    assert plane.settled == {"turn_1": ("complete", {"result": {"done": "a"}})}


async def test_json_log_lines_name_the_session_epoch_namespace_and_held_turn(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, "a"))
    await plane.turns.put({"closed": True})
    runner = await start_runner(
        "actors:logs_and_finishes",
        **{logs.ENV_LOG_FORMAT: "json", contract.ENV_NAMESPACE: "team"},
    )

    _, stderr = await asyncio.wait_for(runner.communicate(), 60)

    print(stderr.decode())  # shown by pytest when the test fails
    lines = [json.loads(line) for line in stderr.decode().splitlines()]
    working = next(line for line in lines if line["logger"] == "actors")
    assert working["message"] == "working on a"
    about = {"namespace": "team", "session": SID, "epoch": EPOCH, "turn": "turn_1"}
    assert {k: working.get(k) for k in about} == about


async def test_an_idle_process_ends_with_0_after_the_control_planes_idle_timeout(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, "a"))
    runner = await start_runner("actors:finishes", **{contract.ENV_IDLE_TIMEOUT: "0.5"})

    assert await exit_code(runner) == ExitCode.OK
    assert plane.settled == {"turn_1": ("complete", {"result": {"done": "a"}})}
    idle = [body for name, body in plane.calls if name == "receive"][1:]
    assert idle
    assert all(body["idle_timeout"] == 0.5 and body["timeout"] <= 0.5 for body in idle)


@pytest.mark.parametrize("protocol", [None, "2"])
async def test_the_code_s_settings_are_reported_on_the_first_receive_only(
    plane: FakeControlPlane, start_runner: StartRunner, protocol: str | None
) -> None:
    """A control plane of revision 2 is told what ``actor(...)`` declared, once; an
    older one (no ``HELMR_PROTOCOL``) is sent the receive it knows."""
    await plane.turns.put(assignment("turn_1", 1, "a"))
    revision = {} if protocol is None else {contract.ENV_PROTOCOL: protocol}
    runner = await start_runner("actors:declares", **{contract.ENV_IDLE_TIMEOUT: "0.5"}, **revision)

    assert await exit_code(runner) == ExitCode.OK
    receives = [body for name, body in plane.calls if name == "receive"]
    assert len(receives) >= 2
    reported = [body.get("actor_settings") for body in receives]
    if protocol is None:
        assert reported == [None] * len(receives)
        assert all("actor_settings" not in body for body in receives)
    else:
        declared = {
            "queue": 5,
            "max_duration": None,
            "ttl": 60,
            "retry": None,
            "idle_timeout": None,
        }
        assert reported == [declared] + [None] * (len(receives) - 1)


async def test_an_exception_from_run_fails_the_held_turn_and_the_process(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    """000: "`failed`: The handler threw ...": the Turn fails with ``handler_raised``."""
    await plane.turns.put(assignment("turn_1", 1, "a"))

    assert await exit_code(await start_runner("actors:explodes")) == ExitCode.ACTOR_FAILED
    assert [v for _, v in plane.outputs.values()] == ["before"]
    assert plane.settled == {
        "turn_1": ("fail", {"error": {"code": "handler_raised", "message": "exploded"}})
    }


async def test_returning_from_run_with_the_turn_unsettled_fails_it(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    """000: "`failed`: ... broke the Turn contract"; 001: "Returning from `run` ... is not
    implicit completion": the runner fails it (``turn_contract_broken``) and exits 0."""
    await plane.turns.put(assignment("turn_1", 1, "a"))

    assert await exit_code(await start_runner("actors:forgets_to_settle")) == ExitCode.OK
    assert [v for _, v in plane.outputs.values()] == ["working"]
    name, body = plane.settled["turn_1"]
    assert (name, body["error"]["code"]) == ("fail", "turn_contract_broken")


@pytest.mark.parametrize(
    ("entrypoint", "overrides"),
    [
        ("actors:not_an_actor", {}),
        ("actors:missing", {}),
        ("no_such_module:actor", {}),
        ("actors", {}),
        ("actors:finishes", {contract.ENV_PROCESS_EPOCH: "three"}),
        ("actors:finishes", {contract.ENV_TOKEN_FILE: "/nonexistent/token"}),
        ("actors:finishes", {contract.ENV_URL: ""}),
        ("actors:finishes", {contract.ENV_IDLE_TIMEOUT: "0"}),
        ("actors:finishes", {contract.ENV_IDLE_TIMEOUT: "soon"}),
        ("actors:finishes", {contract.ENV_IDLE_TIMEOUT: "nan"}),
        ("actors:finishes", {contract.ENV_PROTOCOL: "two"}),
        ("actors:finishes", {contract.ENV_PROTOCOL: "0"}),
    ],
)
async def test_a_runner_that_cannot_load_its_actor_exits_78(
    plane: FakeControlPlane, start_runner: StartRunner, entrypoint: str, overrides: dict[str, str]
) -> None:
    assert await exit_code(await start_runner(entrypoint, **overrides)) == ExitCode.INIT_FAILED
    assert plane.calls == []


async def test_a_fenced_process_exits_at_once_and_writes_nothing_more(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    async def fence_the_second_write(request: web.Request, body: dict[str, Any]) -> None:
        if body["value"] == 1:
            raise StaleEpoch("a newer process runs this session")

    plane.hooks["turn_output"] = fence_the_second_write
    await plane.turns.put(assignment("turn_1", 1, "a"))

    assert await exit_code(await start_runner("actors:keeps_writing")) == ExitCode.FENCED
    assert [v for _, v in plane.outputs.values()] == [0]
    assert plane.names() == ["receive", "turn_output", "turn_output"]


async def test_sigterm_signals_the_turn_cancels_run_and_exits_0(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, "a"))
    runner = await start_runner("actors:waits_for_stop")
    # Polling for messages starts once run waits after registering its handler.
    await plane.until(lambda: "next" in plane.names())
    runner.send_signal(signal.SIGTERM)

    assert await exit_code(runner) == ExitCode.OK
    assert [v for _, v in plane.outputs.values()] == [{"signal": "process_stopping"}]
    assert plane.settled == {}  # stopping settles nothing: the control plane decides


# The echo example (examples/echo/echo.py), and the misbehaving echo the cluster
# tests use (tests/actors/misbehaving.py).


async def test_echo_streams_echoes_messages_responds_and_completes(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.add_message("turn_1", "msg_1", "are you there?")
    await plane.add_message("turn_1", "msg_2", {"reject": "not a question for me"})

    async def after_the_messages(request: web.Request, body: dict[str, Any]) -> None:
        # Hold the turn's end until both messages were handled, whatever the timing.
        await plane.until(lambda: len(plane.outcomes) == 4)

    plane.hooks["respond"] = after_the_messages
    await plane.turns.put(assignment("turn_1", 1, "hello big world"))
    await plane.turns.put({"closed": True})

    assert await exit_code(await start_runner("echo.echo:echo")) == ExitCode.OK
    written = [v for _, v in plane.outputs.values()]
    assert [v for v in written if isinstance(v, str)] == ["hello ", "big ", "world "]
    assert [v for v in written if isinstance(v, dict)] == [{"message": "are you there?"}]
    assert plane.outcomes == [
        ("msg_1", "started", None),
        ("msg_1", "delivered", None),
        ("msg_2", "started", None),
        ("msg_2", "rejected", "not a question for me"),
    ]
    assert plane.responses == {"turn_1": "echo: hello big world"}
    assert plane.settled == {"turn_1": ("complete", {"result": {"echo": "hello big world"}})}


async def test_misbehaving_echo_fails_a_turn_that_raises_and_goes_on(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, {"raise": "boom"}))
    await plane.turns.put(assignment("turn_2", 2, "next"))
    await plane.turns.put({"closed": True})

    assert await exit_code(await start_runner("misbehaving:misbehaving")) == ExitCode.OK
    assert plane.settled == {
        "turn_1": ("fail", {"error": {"code": "actor_error", "message": "boom"}}),
        "turn_2": ("complete", {"result": {"echo": "next"}}),
    }


async def test_misbehaving_echo_crash_is_a_process_crash(
    plane: FakeControlPlane, start_runner: StartRunner
) -> None:
    await plane.turns.put(assignment("turn_1", 1, {"crash": True}))

    assert await exit_code(await start_runner("misbehaving:misbehaving")) == 3
    assert plane.settled == {}
