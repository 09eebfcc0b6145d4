"""send, exact-Turn messages, handler readiness, message outcomes and settlement."""

from __future__ import annotations

import asyncio

import pytest

from helmr.errors import Conflict, NotFound, SessionHeld, TurnNotActive, TurnSettling
from helmr.protocol import ErrorInfo
from helmr.states import MessageOutcome
from tests.unit.control.harness import Harness


async def test_send_to_an_idle_session_enqueues(h: Harness) -> None:
    session = await h.session()
    result = await h.control.send(session.id, {"issue": "APP-42"})
    assert result.kind == "enqueued"
    assert result.message is None
    assert (result.turn.status, result.turn.source, result.turn.input) == (
        "queued",
        "send",
        {"issue": "APP-42"},
    )


async def test_send_messages_the_active_turn_even_before_its_handler_is_ready(
    h: Harness,
) -> None:
    session = await h.session()
    _, turn = await h.running(session.id)
    assert not turn.messages_ready
    result = await h.control.send(session.id, {"type": "update_constraints"})
    assert result.kind == "messaged"
    assert result.turn.id == turn.id
    assert result.message is not None
    assert (result.message.status, result.message.turn_id) == ("admitted", turn.id)
    assert result.message.id.startswith("msg_")
    last = (await h.events(session.id))[-1]
    assert (last.kind, last.turn_id, last.data) == (
        "message.admitted",
        turn.id,
        {"messageId": result.message.id},
    )


async def test_exact_turn_send_needs_that_turn_to_be_active(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, 2)
    assert (await h.control.send(session.id, "x", turn_id=turn.id)).kind == "messaged"
    with pytest.raises(TurnNotActive):
        await h.control.send(session.id, "x", turn_id=queued.id)
    with pytest.raises(NotFound):
        await h.control.send(session.id, "x", turn_id="turn_missing")
    await h.control.complete(session.id, epoch, turn.id)
    with pytest.raises(TurnNotActive):
        await h.control.send(session.id, "x", turn_id=turn.id)


async def test_held_sessions_reject_send(h: Harness) -> None:
    session = await h.session()
    await h.control.interrupt(session.id)
    with pytest.raises(SessionHeld):
        await h.control.send(session.id, "x")


async def test_messages_are_handed_out_in_order_until_started(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    first = await h.message(session.id, "one")
    second = await h.message(session.id, "two")
    ready = await h.control.messages_ready(session.id, epoch, turn.id)
    assert ready.messages_ready

    for _ in range(2):  # again and again until it is reported started
        got = await h.control.next_message(session.id, epoch, turn.id, timeout=0)
        assert got is not None
        assert (got.id, got.data) == (first, "one")
    await h.control.report_message(session.id, epoch, turn.id, first, MessageOutcome.STARTED)
    got = await h.control.next_message(session.id, epoch, turn.id, timeout=0)
    assert got is not None
    assert got.id == second
    delivered = await h.control.report_message(
        session.id, epoch, turn.id, first, MessageOutcome.DELIVERED
    )
    assert delivered.status == "delivered"
    assert await h.kinds(session.id, after=2) == [
        "message.admitted",
        "message.admitted",
        "message.started",
        "message.delivered",
    ]


async def test_next_message_waits_for_a_message(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    assert await h.control.next_message(session.id, epoch, turn.id, timeout=0) is None
    waiting = asyncio.create_task(h.control.next_message(session.id, epoch, turn.id, timeout=60))
    await asyncio.sleep(0)
    message_id = await h.message(session.id, "late")
    got = await waiting
    assert got is not None
    assert got.id == message_id


async def test_next_message_ends_when_the_turn_ends(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    waiting = asyncio.create_task(h.control.next_message(session.id, epoch, turn.id, timeout=60))
    await asyncio.sleep(0)
    await h.control.interrupt(session.id, turn.id)
    with pytest.raises(TurnNotActive):
        await waiting


async def test_settlement_rejects_new_sends_and_unstarted_messages(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    running = await h.message(session.id, "in the handler")
    waiting = await h.message(session.id, "never started")
    await h.control.report_message(session.id, epoch, turn.id, running, MessageOutcome.STARTED)
    mark = await h.last_sequence(session.id)

    settling = await h.control.complete(session.id, epoch, turn.id, "done")

    assert (settling.status, settling.settling) == ("running", True)
    rejected = await h.events(session.id, after=mark)
    assert [(e.kind.value, e.data) for e in rejected] == [
        ("message.rejected", {"messageId": waiting, "reason": "turn_settling"})
    ]
    with pytest.raises(TurnSettling):
        await h.control.send(session.id, "too late")
    with pytest.raises(TurnSettling):
        await h.control.send(session.id, "too late", turn_id=turn.id)
    with pytest.raises(TurnSettling):
        await h.control.next_message(session.id, epoch, turn.id, timeout=0)
    with pytest.raises(TurnSettling):
        await h.control.report_message(session.id, epoch, turn.id, waiting, MessageOutcome.STARTED)

    # The outcome commits once the started handler finishes.
    await h.control.report_message(session.id, epoch, turn.id, running, MessageOutcome.DELIVERED)
    done = await h.control.get_turn(session.id, turn.id)
    assert (done.status, done.result, done.settling) == ("completed", "done", False)
    assert await h.kinds(session.id, after=mark + 1) == ["message.delivered", "turn.completed"]


async def test_fail_settles_like_complete(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    waiting = await h.message(session.id, "never started")
    failed = await h.control.fail(session.id, epoch, turn.id, ErrorInfo(code="e", message="m"))
    assert failed.status == "failed"
    assert await h.kinds(session.id, after=3) == ["message.rejected", "turn.failed"]
    rejected = (await h.events(session.id))[-2]
    assert rejected.data == {"messageId": waiting, "reason": "turn_settling"}


async def test_interruption_rejects_messages_whose_handler_never_started(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    waiting = await h.message(session.id, "pending")
    await h.control.interrupt(session.id, turn.id)
    await h.control.process_exited(session.id, epoch, 0)  # the interrupt converges
    rejected = [e for e in await h.events(session.id) if e.kind == "message.rejected"]
    assert [e.data for e in rejected] == [{"messageId": waiting, "reason": "turn_interrupted"}]


async def test_message_outcomes_repeat_safely_and_follow_their_order(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    message_id = await h.message(session.id, "m")
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.STARTED)
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.STARTED)
    rejected = await h.control.report_message(
        session.id, epoch, turn.id, message_id, MessageOutcome.REJECTED, "nope"
    )
    assert (rejected.status, rejected.reason) == ("rejected", "nope")
    await h.control.report_message(
        session.id, epoch, turn.id, message_id, MessageOutcome.REJECTED, "nope"
    )
    with pytest.raises(Conflict):
        await h.control.report_message(
            session.id, epoch, turn.id, message_id, MessageOutcome.DELIVERED
        )
    with pytest.raises(NotFound):
        await h.control.report_message(
            session.id, epoch, turn.id, "msg_missing", MessageOutcome.STARTED
        )
    kinds = await h.kinds(session.id, after=2)
    assert kinds == ["message.admitted", "message.started", "message.rejected"]
    assert (await h.events(session.id))[-1].data == {"messageId": message_id, "reason": "nope"}


async def test_an_unknown_outcome_is_on_the_message_and_in_an_event(h: Harness) -> None:
    """001: "an unexpected handler failure produces an unknown message outcome": the
    exact message read shows ``unknown`` with the failure, and the timeline records it
    as ``message.rejected`` (reason ``handler_failed``, outcome ``unknown``)."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    message_id = await h.message(session.id, "m")
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.STARTED)
    unknown = await h.control.report_message(
        session.id, epoch, turn.id, message_id, MessageOutcome.UNKNOWN, "TypeError: boom"
    )
    assert (unknown.status, unknown.reason) == ("unknown", "TypeError: boom")
    read = await h.control.get_message(session.id, turn.id, message_id)
    assert (read.status, read.reason) == ("unknown", "TypeError: boom")
    last = (await h.events(session.id))[-1]
    assert (last.kind.value, last.turn_id) == ("message.rejected", turn.id)
    assert last.data == {
        "messageId": message_id,
        "reason": "handler_failed",
        "outcome": "unknown",
        "error": "TypeError: boom",
    }
    # A settling Turn does not wait for a handler whose outcome is unknown.
    done = await h.control.complete(session.id, epoch, turn.id)
    assert done.status == "completed"


async def test_messages_never_move_to_another_turn(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    message_id = await h.message(session.id, "for the first turn")
    await h.control.complete(session.id, epoch, turn.id)
    await h.control.enqueue(session.id, 2)
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert await h.control.next_message(session.id, epoch, nxt.id, timeout=0) is None
    with pytest.raises(NotFound):
        await h.control.report_message(
            session.id, epoch, nxt.id, message_id, MessageOutcome.STARTED
        )
