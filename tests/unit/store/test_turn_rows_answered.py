"""A Turn's start and end write its row without reading it back (issue 31): what they
answer is the row they were given with their change applied, which must be the row as
stored, on both stores: each field's value and type (a vocabulary's enum is text once
stored, a time is UTC), the outcome a settlement left unwritten, a response reset."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import JsonValue

from helmr.states import NO_RESULT, ErrorInfo, InterruptReason, TerminalTurnStatus, TurnSource
from helmr.store import ReadTx, TurnRow, Tx
from helmr.store import turns as store_turns
from tests.unit.control.harness import Harness

INPUT: JsonValue = {"n": [1, 2.5, None, "é", {"deep": True}]}


async def _stored(h: Harness, turn_id: str) -> TurnRow:
    def read(rt: ReadTx) -> TurnRow:
        row = store_turns.get(rt, turn_id)
        assert row is not None
        return row

    return await h.store.read(read)


async def _assert_as_stored(h: Harness, answered: TurnRow) -> None:
    # repr: a field's type too (an enum for its text, a time's zone, a tuple for a list).
    assert repr(answered) == repr(await _stored(h, answered.id))


async def _running(h: Harness, *, respond: bool) -> TurnRow:
    """A new Session's Turn, started (with a deadline) by the store's own functions, and
    answered by the start; with ``respond``, given a response."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)

    def enqueue_and_start(tx: Tx) -> TurnRow:
        queued = store_turns.insert(tx, session.id, input=INPUT, idempotency_key=None, source="api")
        return store_turns.started(tx, queued, epoch, tx.now + timedelta(minutes=5))

    started = await h.store.write(enqueue_and_start)
    await _assert_as_stored(h, started)
    assert (started.status, started.epoch, started.deadline_at) == (
        "running",
        epoch,
        h.clock.now + timedelta(minutes=5),
    )
    if not respond:
        return started
    return await h.store.write(lambda tx: store_turns.responded(tx, started, "said"))


async def _ended(
    h: Harness,
    settle: Callable[[Tx, TurnRow], TurnRow],
    status: TerminalTurnStatus,
    reason: str | None,
) -> TurnRow:
    running = await _running(h, respond=True)
    h.clock.advance(timedelta(seconds=3))
    ended = await h.store.write(
        lambda tx: store_turns.ended(tx, settle(tx, running), status, reason)
    )
    await _assert_as_stored(h, ended)
    assert (ended.status, ended.ended_at, ended.settling) == (status, h.clock.now, None)
    return ended


async def test_a_completed_turn_s_end_answers_its_row_as_stored(h: Harness) -> None:
    result: JsonValue = {"ok": [1, 2.5, None], "text": "done"}
    ended = await _ended(
        h,
        lambda tx, turn: store_turns.completing(tx, turn, result, ending=True),
        "completed",
        None,
    )
    assert (ended.has_result, ended.result, ended.has_response, ended.response) == (
        True,
        result,
        True,
        "said",
    )


async def test_a_turn_completed_without_a_result_answers_its_row_as_stored(h: Harness) -> None:
    ended = await _ended(
        h,
        lambda tx, turn: store_turns.completing(tx, turn, NO_RESULT, ending=True),
        "completed",
        None,
    )
    assert (ended.has_result, ended.result) == (False, None)


async def test_a_failed_turn_s_end_answers_its_row_as_stored(h: Harness) -> None:
    error = ErrorInfo(code="boom", message="it broke")
    ended = await _ended(
        h,
        lambda tx, turn: store_turns.failing(tx, turn, error, ending=True),
        "failed",
        None,
    )
    assert ended.error == {"code": "boom", "message": "it broke"}
    assert (ended.has_response, ended.response) == (False, None)  # only with success


async def test_an_interrupted_turn_s_end_answers_its_row_as_stored(h: Harness) -> None:
    """Its reason given as the vocabulary's enum, answered as the text the column holds."""
    ended = await _ended(
        h, lambda tx, turn: turn, "interrupted", InterruptReason.TURN_DEADLINE_ELAPSED
    )
    assert ended.reason == "turn_deadline_elapsed"


async def test_an_enqueued_turn_s_insert_answers_its_row_as_stored(h: Harness) -> None:
    """Every column given or the schema's default; the input as its JSON reads back (a
    tuple a list, a number key a string), the source as text, not the enum given."""
    session = await h.session()
    given: Any = {"n": (1, 2.5, None, "é"), 7: {"deep": True}}

    def enqueue(tx: Tx) -> TurnRow:
        return store_turns.insert(
            tx, session.id, input=given, idempotency_key="k", source=TurnSource.API
        )

    inserted = await h.store.write(enqueue)
    await _assert_as_stored(h, inserted)
    assert (inserted.input, inserted.source) == (
        {"n": [1, 2.5, None, "é"], "7": {"deep": True}},
        "api",
    )
