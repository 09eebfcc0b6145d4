"""Turns: FIFO admission, dispatch, output, response, result, settlement, fencing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from helmr.control import turns as control_turns
from helmr.control import views
from helmr.control.control import Control
from helmr.errors import (
    InvalidInput,
    NotFound,
    ReceiveTimeout,
    SessionNotOpen,
    StaleEpoch,
    TurnNotActive,
    TurnSettling,
)
from helmr.events import Event
from helmr.protocol import ErrorInfo
from helmr.protocol.api import TurnView
from helmr.states import MessageOutcome
from helmr.store import Tx, timeline
from tests.unit.control.harness import Harness
from tests.unit.counting import CountingConnection


@pytest.fixture
def retention() -> timedelta:
    return timedelta(days=7)


async def test_enqueue_admits_fifo_turns_with_sequences(h: Harness) -> None:
    session = await h.session()
    turns = [await h.control.enqueue(session.id, {"n": n}, source="kubernetes") for n in (1, 2, 3)]
    assert [t.sequence for t in turns] == [1, 2, 3]
    assert all(t.id.startswith("turn_") and t.status == "queued" for t in turns)
    events = await h.events(session.id)
    assert [(e.kind.value, e.turn_id, e.data) for e in events] == [
        ("turn.queued", t.id, {"sequence": t.sequence, "source": "kubernetes"}) for t in turns
    ]
    epoch = await h.control.process_started(session.id)
    for expected in turns:
        got = await h.control.receive(session.id, epoch, timeout=0)
        assert got is not None
        assert (got.id, got.input) == (expected.id, expected.input)
        await h.control.complete(session.id, epoch, got.id)


async def test_enqueue_with_the_same_idempotency_key_returns_the_same_turn(h: Harness) -> None:
    session = await h.session()
    first = await h.control.enqueue(session.id, 1, idempotency_key="linear:event-123")
    again = await h.control.enqueue(session.id, 2, idempotency_key="linear:event-123")
    other = await h.control.enqueue(session.id, 3, idempotency_key="linear:event-124")
    assert again == first
    assert other.id != first.id
    assert await h.kinds(session.id) == ["turn.queued", "turn.queued"]
    # The key keeps answering after the Session stopped admitting.
    await h.control.close(session.id)
    assert (await h.control.enqueue(session.id, 1, idempotency_key="linear:event-123")) == first


async def test_a_held_open_session_still_admits_work(h: Harness) -> None:
    session = await h.session()
    await h.control.interrupt(session.id)
    assert (await h.control.enqueue(session.id, 1)).status == "queued"


async def test_an_enqueue_answers_the_session_as_a_read_after_it(h: Harness) -> None:
    """The API's enqueue answers the Session (for the Turn's Kubernetes object) from
    the guard's read before the admission, its queue one Turn longer: it must be what
    a read after the commit gives, resolved limits or not, held or not, and for a
    repeated idempotency key."""
    unresolved, resolved = await h.session(), await h.session(timedelta(minutes=5))
    await h.control.interrupt(unresolved.id)
    for session_id in (unresolved.id, resolved.id, resolved.id):
        answered, _ = await h.control.enqueue_answering_session(session_id, "x")
        assert answered == await h.control.get_session(session_id)
    again, _ = await h.control.enqueue_answering_session(resolved.id, "y", idempotency_key="k")
    repeated, _ = await h.control.enqueue_answering_session(resolved.id, "y", idempotency_key="k")
    assert again.queued_turns == repeated.queued_turns == 3
    assert repeated == await h.control.get_session(resolved.id)


async def test_the_apis_enqueue_reads_the_session_and_its_queue_once(h: Harness) -> None:
    """For the guard (the queue limit) and the answer: one statement, where the guard
    read the Session and counted its queue apart, and the answer read both again."""
    session = await h.session(timedelta(minutes=5))  # its queue limit resolved

    def enqueue_counted(tx: Tx) -> list[str]:
        tx.conn = counted = CountingConnection(tx.conn)
        control_turns.enqueue_answering_session(tx, session.id, "x")
        return counted.statements

    statements = await h.store.write(enqueue_counted)
    session_reads = [s for s in statements if s.startswith("SELECT") and "FROM sessions" in s]
    assert (len(session_reads), sum("count(*)" in s for s in statements)) == (1, 1)


async def test_input_must_be_json(h: Harness) -> None:
    session = await h.session()
    with pytest.raises(InvalidInput):
        await h.control.enqueue(session.id, float("nan"))
    assert await h.kinds(session.id) == []


async def test_receive_runs_the_fifo_head_on_the_calling_epoch(h: Harness) -> None:
    session = await h.session(max_turn_duration=timedelta(minutes=5))
    epoch = await h.control.process_started(session.id)
    queued = await h.control.enqueue(session.id, "go")
    turn = await h.control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    assert turn.id == queued.id
    assert turn.status == "running"
    assert turn.epoch == epoch
    assert turn.started_at == h.clock.now
    assert turn.deadline_at == h.clock.now + timedelta(minutes=5)
    running = (await h.events(session.id))[-1]
    assert (running.kind, running.data, running.process_epoch) == (
        "turn.running",
        {"processEpoch": epoch},
        epoch,
    )
    assert (await h.control.get_session(session.id)).active_turn_id == turn.id


async def test_receive_times_out_without_work(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)


async def test_receive_waits_for_work_enqueued_later(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    waiting = asyncio.create_task(h.control.receive(session.id, epoch, timeout=60))
    await asyncio.sleep(0)
    queued = await h.control.enqueue(session.id, "later")
    turn = await waiting
    assert turn is not None
    assert turn.id == queued.id


async def test_a_repeated_receive_answers_the_unsettled_turn_again(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    again = await h.control.receive(session.id, epoch, timeout=0)
    assert again is not None
    assert again.id == turn.id
    assert (await h.kinds(session.id)).count("turn.running") == 1


async def test_receive_waits_out_a_settling_turn(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    message_id = await h.message(session.id, "question")
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.STARTED)
    await h.control.complete(session.id, epoch, turn.id)  # waits for the started handler
    await h.control.enqueue(session.id, "next")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.DELIVERED)
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.input == "next"


async def test_complete_without_a_result_differs_from_a_null_result(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    done = await h.control.complete(session.id, epoch, first.id)  # result=NO_RESULT
    assert (done.status, done.has_result, done.result) == ("completed", False, None)
    second = await h.control.enqueue(session.id, 2)
    await h.control.receive(session.id, epoch, timeout=0)
    nulled = await h.control.complete(session.id, epoch, second.id, None)
    assert (nulled.has_result, nulled.result) == (True, None)
    completed = [e for e in await h.events(session.id) if e.kind == "turn.completed"]
    assert [e.data for e in completed] == [
        {"hasResult": False, "hasResponse": False},
        {"hasResult": True, "hasResponse": False},
    ]


async def test_result_and_response_are_committed_with_the_outcome(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.respond(session.id, epoch, turn.id, "The build is green.")
    done = await h.control.complete(session.id, epoch, turn.id, {"status": "green"})
    assert done.status == "completed"
    assert done.ended_at == h.clock.now
    assert (done.result, done.response) == ({"status": "green"}, "The build is green.")
    assert (await h.events(session.id))[-1].data == {"hasResult": True, "hasResponse": True}
    assert (await h.control.get_session(session.id)).active_turn_id is None


async def test_fail_records_the_error_and_no_response(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.respond(session.id, epoch, turn.id, "partial")
    error = ErrorInfo(code="handler_error", message="boom")
    failed = await h.control.fail(session.id, epoch, turn.id, error)
    assert failed.status == "failed"
    assert failed.error == error
    assert (failed.has_response, failed.response) == (False, None)
    last = (await h.events(session.id))[-1]
    assert (last.kind, last.data) == (
        "turn.failed",
        {"error": {"code": "handler_error", "message": "boom"}},
    )
    # A failed Turn leaves the Session open; the next queued Turn runs.
    assert (await h.control.get_session(session.id)).status == "open"


async def test_repeating_the_settling_call_answers_again_and_others_are_refused(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    done = await h.control.complete(session.id, epoch, turn.id, 1)
    assert await h.control.complete(session.id, epoch, turn.id, 1) == done
    with pytest.raises(TurnNotActive):
        await h.control.fail(session.id, epoch, turn.id, ErrorInfo(code="x", message="y"))
    with pytest.raises(TurnNotActive):
        await h.control.respond(session.id, epoch, turn.id, "late")
    assert (await h.kinds(session.id)).count("turn.completed") == 1


async def test_nothing_replays_a_finished_turn(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id)
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)


async def test_output_is_normalized_content_with_run_provenance(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    text = await h.control.output(session.id, epoch, turn.id, "Checking the build")
    data = await h.control.output(session.id, epoch, turn.id, {"progress": 0.5})
    assert (text.kind, text.turn_id, text.process_epoch) == ("turn.output", turn.id, epoch)
    assert text.data == [{"type": "text", "text": "Checking the build"}]
    assert data.data == [{"type": "json", "json": {"progress": 0.5}}]
    assert data.sequence == text.sequence + 1


async def test_output_with_the_same_key_is_recorded_once(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    first = await h.control.output(session.id, epoch, turn.id, "a", idempotency_key="k1")
    again = await h.control.output(session.id, epoch, turn.id, "a", idempotency_key="k1")
    session_level = await h.control.output(session.id, epoch, None, "s", idempotency_key="k1")
    assert again == first
    assert session_level.id != first.id
    assert session_level.turn_id is None
    assert (await h.kinds(session.id)).count("turn.output") == 2


async def test_output_needs_the_active_turn(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, 2)
    with pytest.raises(TurnNotActive):
        await h.control.output(session.id, epoch, queued.id, "x")
    await h.control.complete(session.id, epoch, turn.id)
    with pytest.raises(TurnNotActive):
        await h.control.output(session.id, epoch, turn.id, "x")
    with pytest.raises(NotFound):
        await h.control.output(session.id, epoch, "turn_missing", "x")


async def test_respond_is_refused_while_settling(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    message_id = await h.message(session.id, "m")
    await h.control.report_message(session.id, epoch, turn.id, message_id, MessageOutcome.STARTED)
    settling = await h.control.complete(session.id, epoch, turn.id)
    assert (settling.status, settling.settling) == ("running", True)
    with pytest.raises(TurnSettling):
        await h.control.respond(session.id, epoch, turn.id, "late")
    # Callbacks that started before settlement may still write output.
    await h.control.output(session.id, epoch, turn.id, "from the callback")


def _runner_calls(
    control: Control, session_id: str, turn_id: str, epoch: int
) -> list[Callable[[], Awaitable[Any]]]:
    return [
        lambda: control.receive(session_id, epoch, timeout=0),
        lambda: control.output(session_id, epoch, turn_id, "x"),
        lambda: control.output(session_id, epoch, None, "x"),
        lambda: control.respond(session_id, epoch, turn_id, "x"),
        lambda: control.complete(session_id, epoch, turn_id),
        lambda: control.fail(session_id, epoch, turn_id, ErrorInfo(code="x", message="y")),
        lambda: control.messages_ready(session_id, epoch, turn_id),
        lambda: control.next_message(session_id, epoch, turn_id, timeout=0),
        lambda: control.report_message(session_id, epoch, turn_id, "msg_x", MessageOutcome.STARTED),
        lambda: control.report_message(
            session_id, epoch, turn_id, "msg_x", MessageOutcome.DELIVERED
        ),
        lambda: control.report_message(
            session_id, epoch, turn_id, "msg_x", MessageOutcome.REJECTED, "no"
        ),
        lambda: control.report_message(
            session_id, epoch, turn_id, "msg_x", MessageOutcome.UNKNOWN, "?"
        ),
    ]


async def test_every_runner_call_from_another_epoch_is_fenced(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    before = await h.last_sequence(session.id)
    for call in _runner_calls(h.control, session.id, turn.id, epoch + 1):
        with pytest.raises(StaleEpoch):
            await call()
    await h.control.process_exited(session.id, epoch, 1)
    after_exit = await h.last_sequence(session.id)
    assert after_exit > before
    for call in _runner_calls(h.control, session.id, turn.id, epoch):
        with pytest.raises(StaleEpoch):
            await call()
    assert await h.last_sequence(session.id) == after_exit


async def test_wait_turn_returns_the_outcome_or_the_turn_as_it_is(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    unfinished = await h.control.wait_turn(session.id, turn.id, timeout=0)
    assert unfinished.status == "running"
    waiting = asyncio.create_task(h.control.wait_turn(session.id, turn.id, timeout=60))
    await asyncio.sleep(0)
    await h.control.complete(session.id, epoch, turn.id, "ok")
    outcome = await waiting
    assert (outcome.status, outcome.result) == ("completed", "ok")


async def test_wait_events_returns_new_events(h: Harness) -> None:
    session = await h.session()
    empty = await h.control.wait_events(session.id, after=0, timeout=0)
    assert (empty.records, empty.next_after) == ([], 0)
    waiting = asyncio.create_task(h.control.wait_events(session.id, after=0, timeout=60))
    await asyncio.sleep(0)
    turn = await h.control.enqueue(session.id, 1)
    page = await waiting
    assert [(e.kind.value, e.turn_id) for e in page.records] == [("turn.queued", turn.id)]


async def test_event_pages_are_validated(h: Harness) -> None:
    session = await h.session()
    for after, limit in [(-1, 10), (0, 0), (0, 1001), (2**53, 10)]:
        with pytest.raises(InvalidInput):
            await h.control.list_events(session.id, after, limit)


async def test_expired_payloads_keep_turn_identity_and_status(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id, input={"secret": 1})
    await h.control.respond(session.id, epoch, turn.id, "answer")
    await h.control.complete(session.id, epoch, turn.id, {"r": 1})
    queued = await h.control.enqueue(session.id, {"still": "needed"})
    h.clock.advance(timedelta(days=8))
    kept = await h.control.output(session.id, epoch, None, "recent")

    expired = await h.control.expire_history(h.clock.now)

    assert (expired.turns, expired.events) == (1, kept.sequence - 1)
    view = await h.control.get_turn(session.id, turn.id)
    assert view.payload_expired
    assert (view.id, view.sequence, view.status) == (turn.id, 1, "completed")
    assert (view.input, view.result, view.response) == (None, None, None)
    assert (view.has_result, view.has_response) == (True, True)
    still = await h.control.get_turn(session.id, queued.id)
    assert (still.payload_expired, still.input) == (False, {"still": "needed"})
    page = await h.control.list_events(session.id)
    assert page.retained_after == kept.sequence - 1
    assert [e.id for e in page.records] == [kept.id]


async def test_closed_sessions_admit_nothing(h: Harness) -> None:
    session = await h.session()
    await h.control.close(session.id)
    with pytest.raises(SessionNotOpen):
        await h.control.enqueue(session.id, 1)


async def test_a_settlement_taking_the_next_turn_builds_the_next_turn_s_view_alone(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settled Turn's view is no one's when the settlement takes the next Turn: the
    runner's reply names the next one (issue 31). A plain ``complete`` answers its own."""
    session = await h.session()
    epoch, first = await h.running(session.id)
    await h.control.enqueue(session.id, "second")
    built: list[str] = []
    view = views.turn_view

    def counted(row: Any) -> Any:
        built.append(row.id)
        return view(row)

    monkeypatch.setattr(control_turns, "turn_view", counted)
    second = await h.control.complete_and_take_next(session.id, epoch, first.id)
    assert isinstance(second, TurnView)
    assert built == [second.id]
    built.clear()
    done = await h.control.complete(session.id, epoch, second.id)
    assert (done.status, built) == ("completed", [second.id])


async def test_a_turn_s_lifecycle_facts_are_recorded_without_building_their_events(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No caller reads the event a lifecycle fact appends (``record``): it is not
    built, a validation of each of its fields (issue 31). The facts are all stored."""
    session = await h.session()
    built: list[object] = []
    event = Event

    def counted(**fields: Any) -> Any:
        built.append(fields["kind"])
        return event(**fields)

    monkeypatch.setattr(timeline, "Event", counted)
    epoch, turn = await h.running(session.id, "one")
    await h.control.complete(session.id, epoch, turn.id)
    assert built == []
    kinds = [record.kind for record in await h.events(session.id) if record.turn_id == turn.id]
    assert kinds == ["turn.queued", "turn.running", "turn.completed"]
