"""Property: whenever the runner's read-only first look (``turns.look``) answers a
``receive``, ``turns.take_next`` in a write transaction answers the same and writes
nothing, over Session/Turn states reached by random sequences of real controls
(enqueue, receive, settle with and without a started message handler, interrupt,
resume, cancel, close, a process's start, preparation and exit, deadlines).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helmr.control import turns
from helmr.errors import HelmrError, ReceiveTimeout
from helmr.protocol import ErrorInfo
from helmr.states import MessageOutcome
from helmr.store import Tx
from tests.postgres import PostgresServer
from tests.unit.control.harness import DEFAULT_LIMITS, Harness

LIMITS = replace(
    DEFAULT_LIMITS, max_run_duration=timedelta(minutes=10), max_turn_duration=timedelta(minutes=3)
)


class _WritesCounted:
    """A write transaction's connection that keeps every statement but a SELECT."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.writes: list[str] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if not sql.lstrip().upper().startswith("SELECT"):
            self.writes.append(sql)
        return self._conn.execute(sql, parameters)


def _take_next_counting_writes(tx: Tx, session_id: str, epoch: int) -> tuple[object, list[str]]:
    counted = _WritesCounted(tx.conn)
    tx.conn = counted
    try:
        answer: object = turns.take_next(tx, session_id, epoch)
    except HelmrError as exc:
        answer = (type(exc), str(exc))
    return answer, counted.writes


@dataclass
class _World:
    """What the steps know of the Session they drive."""

    h: Harness
    session_id: str
    epoch: int = 0
    turn_id: str | None = None
    message_id: str | None = None
    hold_id: str | None = None


async def _receive(w: _World) -> None:
    turn = await w.h.control.receive(w.session_id, w.epoch, timeout=0)
    w.turn_id = None if turn is None else turn.id


async def _started_message(w: _World) -> None:
    if w.turn_id is None:
        return
    sent = await w.h.control.send(w.session_id, "m", turn_id=w.turn_id)
    if sent.message is None:
        return
    w.message_id = sent.message.id
    await w.h.control.report_message(
        w.session_id, w.epoch, w.turn_id, w.message_id, MessageOutcome.STARTED
    )


async def _message_delivered(w: _World) -> None:
    if w.turn_id is None or w.message_id is None:
        return
    await w.h.control.report_message(
        w.session_id, w.epoch, w.turn_id, w.message_id, MessageOutcome.DELIVERED
    )


async def _interrupt(w: _World) -> None:
    w.hold_id = (await w.h.control.interrupt(w.session_id)).hold_id


async def _resume(w: _World) -> None:
    if w.hold_id is None:
        return
    await w.h.control.resume(w.session_id, w.hold_id)


async def _start_process(w: _World) -> None:
    w.epoch = await w.h.control.process_started(w.session_id)
    await w.h.control.process_prepared(w.session_id, w.epoch)


async def _advance(w: _World, minutes: int) -> None:
    w.h.clock.advance(timedelta(minutes=minutes))


async def _expire(w: _World) -> None:
    await w.h.control.expire_deadlines(w.h.clock.now)


Step = Callable[[_World], Awaitable[object]]

STEPS: dict[str, Step] = {
    "enqueue": lambda w: w.h.control.enqueue(w.session_id, "x"),
    "receive": _receive,
    "complete": lambda w: w.h.control.complete(w.session_id, w.epoch, w.turn_id or "none"),
    "fail_turn": lambda w: w.h.control.fail(
        w.session_id, w.epoch, w.turn_id or "none", ErrorInfo(code="boom", message="boom")
    ),
    "started_message": _started_message,
    "message_delivered": _message_delivered,
    "interrupt": _interrupt,
    "resume": _resume,
    "cancel": lambda w: w.h.control.cancel(w.session_id),
    "close": lambda w: w.h.control.close(w.session_id),
    "exit": lambda w: w.h.control.process_exited(w.session_id, w.epoch, 0),
    "start_process": _start_process,
    "advance_1m": partial(_advance, minutes=1),
    "advance_4m": partial(_advance, minutes=4),
    "advance_11m": partial(_advance, minutes=11),
    "expire_deadlines": _expire,
}


async def _check(w: _World) -> None:
    """For the live epoch and a fenced one: where ``look`` answers, ``take_next``
    answers the same without writing."""
    for epoch in {w.epoch, w.epoch + 1}:
        try:
            looked: object = await w.h.store.read(
                partial(turns.look, session_id=w.session_id, epoch=epoch)
            )
        except HelmrError as exc:
            looked = (type(exc), str(exc))
        if looked is turns.Unanswered.TAKE_NEXT:
            continue
        taken, writes = await w.h.store.write(
            partial(_take_next_counting_writes, session_id=w.session_id, epoch=epoch)
        )
        assert (taken, writes) == (looked, [])


async def _scenario(location: str | Path, steps: list[str]) -> None:
    async with Harness.open(location) as h:
        session = await h.session()
        await h.control.resolve_limits(session.id, LIMITS)
        w = _World(h, session.id)
        await _start_process(w)
        await _check(w)
        for name in steps:
            # A control refused in this state leaves a state to check all the same.
            with contextlib.suppress(HelmrError):
                await STEPS[name](w)
            await _check(w)


step_lists = st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=25)


# Each example opens a store of its own: longer than a unit test's usual 30 s on a
# loaded machine.
@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=step_lists)
def test_look_answers_as_take_next_would_without_writes_on_sqlite(steps: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(Path(tmp) / "helmr.db", steps))


# Fewer: each example creates a database on the server.
@pytest.mark.timeout(120)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=step_lists)
def test_look_answers_as_take_next_would_without_writes_on_postgresql(
    postgres_server: PostgresServer, steps: list[str]
) -> None:
    with postgres_server.database() as url:
        asyncio.run(_scenario(url, steps))


async def test_an_idle_receive_writes_nothing(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    writes: list[str] = []
    h.store.observe = lambda kind, lane, seconds: writes.append(kind) if kind == "write" else None
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    await h.control.enqueue(session.id, "x")
    turn = await h.control.receive(session.id, epoch, timeout=0)
    again = await h.control.receive(session.id, epoch, timeout=0)  # its reply was lost
    assert turn is not None
    assert again == turn
    assert writes == ["write", "write"]  # the enqueue and the receive that started the Turn


async def test_a_receive_after_this_replicas_enqueue_writes_without_reading(h: Harness) -> None:
    """The read would only find the Turn to start (``Store.turn_queued``); once it
    started, the next receive (nothing queued) reads first again."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    kinds: list[str] = []
    turn = await h.control.enqueue(session.id, "x")
    h.store.observe = lambda kind, lane, seconds: kinds.append(kind)
    running = await h.control.receive(session.id, epoch, timeout=0)
    assert (running and running.id, kinds) == (turn.id, ["write"])
    await h.control.complete(session.id, epoch, turn.id)
    kinds.clear()
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    assert kinds == ["read"]


async def test_a_receive_that_waits_in_vain_reads_once_and_writes_nothing(h: Harness) -> None:
    """Its time up with nothing committed to the Session meanwhile, a long poll
    answers what it read: asking again was a write transaction per idle runner."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    kinds: list[str] = []
    h.store.observe = lambda kind, lane, seconds: kinds.append(kind)
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0.2)
    assert kinds == ["read"]


async def test_a_receive_woken_by_an_enqueue_takes_the_turn(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    waiting = asyncio.create_task(h.control.receive(session.id, epoch, timeout=30))
    await asyncio.sleep(0.1)  # it has looked, and waits
    turn = await h.control.enqueue(session.id, "x")
    taken = await asyncio.wait_for(waiting, 10)
    assert taken is not None
    assert taken.id == turn.id
