"""Session controls: open, close, cancel, interrupt, resume (spec/001, spec/000)."""

from __future__ import annotations

import pytest

from helmr.errors import (
    Conflict,
    HoldMismatch,
    NotFound,
    ReceiveTimeout,
    SessionHeld,
    SessionNotOpen,
    TurnNotActive,
)
from tests.unit.control.harness import Harness


async def test_open_with_the_same_idempotency_key_returns_the_same_session(h: Harness) -> None:
    first = await h.control.open_session(
        namespace="team", name="a", actor="x", workspace="w", idempotency_key="k"
    )
    again = await h.control.open_session(
        namespace="team", name="a", actor="x", workspace="w", idempotency_key="k"
    )
    assert again.id == first.id
    assert first.id.startswith("ses_")
    assert first.status == "open"


async def test_a_workspace_is_owned_by_one_session_until_it_is_closed(h: Harness) -> None:
    first = await h.control.open_session(namespace="team", name="a", actor="x", workspace="w")
    with pytest.raises(Conflict):
        await h.control.open_session(namespace="team", name="b", actor="x", workspace="w")
    other_namespace = await h.control.open_session(
        namespace="other", name="b", actor="x", workspace="w"
    )
    assert other_namespace.id != first.id
    await h.control.close(first.id)
    second = await h.control.open_session(namespace="team", name="b", actor="x", workspace="w")
    assert second.id != first.id


async def test_unknown_session_is_not_found(h: Harness) -> None:
    with pytest.raises(NotFound):
        await h.control.get_session("ses_missing")
    with pytest.raises(NotFound):
        await h.control.enqueue("ses_missing", 1)
    with pytest.raises(NotFound):
        await h.control.list_events("ses_missing")


async def test_an_idle_close_records_only_session_closed(h: Harness) -> None:
    session = await h.session()
    closed = await h.control.close(session.id)
    assert closed.status == "closed"
    assert closed.closed_how == "close"
    assert await h.kinds(session.id) == ["session.closed"]
    assert (await h.events(session.id))[-1].data == {"how": "close"}


async def test_an_idle_close_waits_for_the_live_process_to_end(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    closing = await h.control.close(session.id)
    assert closing.status == "closing"
    assert closing.closed_how is None
    stops = await h.control.processes_to_stop()
    assert [(s.session_id, s.epoch, s.reason) for s in stops] == [(session.id, epoch, "close")]
    assert await h.control.receive(session.id, epoch, timeout=0) is None
    outcome = await h.control.process_exited(session.id, epoch, 0)
    assert outcome.outcome == "stopped"
    state = await h.control.get_session(session.id)
    assert (state.status, state.closed_how) == ("closed", "close")
    assert await h.kinds(session.id) == ["session.process_stopped", "session.closed"]


async def test_close_rejects_admission_and_drains_the_fifo(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    second = await h.control.enqueue(session.id, "second")
    closing = await h.control.close(session.id)
    assert closing.status == "closing"
    with pytest.raises(SessionNotOpen):
        await h.control.enqueue(session.id, "late")
    # The active Turn still takes messages: that is not new admission.
    assert (await h.control.send(session.id, "note")).kind == "messaged"
    await h.control.complete(session.id, epoch, first.id)
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == second.id
    await h.control.complete(session.id, epoch, second.id)
    assert await h.control.receive(session.id, epoch, timeout=0) is None
    with pytest.raises(SessionNotOpen):
        await h.control.send(session.id, "late")  # idle: it would enqueue
    await h.control.process_exited(session.id, epoch, 0)
    state = await h.control.get_session(session.id)
    assert (state.status, state.closed_how) == ("closed", "close")
    kinds = await h.kinds(session.id)
    assert kinds.count("session.close") == 1
    assert kinds[-1] == "session.closed"


async def test_close_again_is_a_no_op(h: Harness) -> None:
    session = await h.session()
    await h.running(session.id)
    await h.control.close(session.id)
    before = await h.last_sequence(session.id)
    assert (await h.control.close(session.id)).status == "closing"
    assert await h.last_sequence(session.id) == before


async def test_idle_expiry_refuses_a_session_that_has_work(h: Harness) -> None:
    session = await h.session()
    await h.control.enqueue(session.id, 1)
    with pytest.raises(Conflict):
        await h.control.close(session.id, how="idle")
    empty = await h.session()
    closed = await h.control.close(empty.id, how="idle")
    assert closed.closed_how == "idle"


async def test_cancel_cancels_queued_interrupts_active_and_closes_once_stopped(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, active = await h.running(session.id)
    queued = [await h.control.enqueue(session.id, n) for n in (2, 3)]
    mark = await h.last_sequence(session.id)

    accepted = await h.control.cancel(session.id)

    assert accepted.cancel_requested_at == h.clock.now
    assert accepted.status == "closing"
    for turn in queued:
        assert (await h.control.get_turn(session.id, turn.id)).status == "cancelled"
    # The active Turn stops first: it is interrupted once its process has ended.
    assert (await h.control.get_turn(session.id, active.id)).status == "running"
    assert await h.kinds(session.id, after=mark) == ["turn.cancelled", "turn.cancelled"]
    stops = await h.control.processes_to_stop()
    assert [(s.session_id, s.reason) for s in stops] == [(session.id, "cancel")]

    await h.control.process_exited(session.id, epoch, -15)
    interrupted = await h.control.get_turn(session.id, active.id)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "cancel")
    state = await h.control.get_session(session.id)
    assert (state.status, state.closed_how) == ("closed", "cancel")
    assert state.cancel_requested_at == accepted.cancel_requested_at
    tail = await h.events(session.id, after=mark + 2)
    assert [e.kind.value for e in tail] == [
        "turn.interrupted",
        "session.process_stopped",
        "session.closed",
    ]
    assert tail[-1].data == {"how": "cancel"}


async def test_cancel_rejects_new_input_and_cannot_be_undone(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await h.control.interrupt(session.id)
    held = await h.control.get_session(session.id)
    assert held.hold is not None
    await h.control.cancel(session.id)
    with pytest.raises(SessionNotOpen):
        await h.control.enqueue(session.id, 1)
    with pytest.raises(SessionNotOpen):
        await h.control.send(session.id, 1)
    with pytest.raises(SessionNotOpen):
        await h.control.resume(session.id, held.hold.hold_id)
    again = await h.control.cancel(session.id)
    assert again.cancel_requested_at is not None
    await h.control.process_exited(session.id, epoch, 0)
    assert (await h.control.get_session(session.id)).status == "closed"


async def test_an_idle_cancel_records_only_session_closed(h: Harness) -> None:
    session = await h.session()
    state = await h.control.cancel(session.id)
    assert (state.status, state.closed_how) == ("closed", "cancel")
    assert await h.kinds(session.id) == ["session.closed"]


async def test_cancel_escalates_a_closing_session(h: Harness) -> None:
    session = await h.session()
    queued = await h.control.enqueue(session.id, 1)
    await h.control.interrupt(session.id)  # held: the close cannot drain
    assert (await h.control.close(session.id)).status == "closing"
    state = await h.control.cancel(session.id)
    assert (state.status, state.closed_how) == ("closed", "cancel")
    assert (await h.control.get_turn(session.id, queued.id)).status == "cancelled"


async def test_session_interrupt_holds_and_keeps_queued_work(h: Harness) -> None:
    session = await h.session()
    epoch, active = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")

    receipt = await h.control.interrupt(session.id)

    assert receipt.scope == "session"
    assert receipt.turn_id == active.id
    assert receipt.hold_id.startswith("hold_")
    assert (await h.control.get_turn(session.id, queued.id)).status == "queued"
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (receipt.hold_id, "interrupt")
    with pytest.raises(ReceiveTimeout):  # the runner lets go: the interrupt converges
        await h.control.receive(session.id, epoch, timeout=0)
    turn = await h.control.get_turn(session.id, active.id)
    assert (turn.status, turn.reason) == ("interrupted", "interrupt")
    with pytest.raises(SessionHeld):
        await h.control.send(session.id, "hi")
    assert (await h.control.enqueue(session.id, "more")).status == "queued"
    assert await h.control.sessions_needing_runner(h.clock()) == []
    events = await h.events(session.id)
    interrupt = next(e for e in events if e.kind == "session.interrupt")
    assert interrupt.data == {"holdId": receipt.hold_id, "turnId": active.id, "scope": "session"}


async def test_resume_releases_exactly_that_hold_and_never_replays(h: Harness) -> None:
    session = await h.session()
    epoch, active = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")
    receipt = await h.control.interrupt(session.id)
    with pytest.raises(ReceiveTimeout):  # the runner lets go: the interrupt converges
        await h.control.receive(session.id, epoch, timeout=0)

    with pytest.raises(HoldMismatch):
        await h.control.resume(session.id, "hold_other")
    resumed = await h.control.resume(session.id, receipt.hold_id)

    assert resumed.hold is None
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == queued.id
    assert (await h.control.get_turn(session.id, active.id)).status == "interrupted"
    kinds = await h.kinds(session.id)
    assert kinds.count("session.resume") == 1
    # Repeating the resume of a released hold is accepted and records nothing.
    before = await h.last_sequence(session.id)
    await h.control.resume(session.id, receipt.hold_id)
    assert await h.last_sequence(session.id) == before


async def test_resume_with_no_hold_is_a_mismatch(h: Harness) -> None:
    session = await h.session()
    with pytest.raises(HoldMismatch):
        await h.control.resume(session.id, "hold_nothing")


async def test_resuming_an_empty_session_leaves_it_idle(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    receipt = await h.control.interrupt(session.id)
    assert receipt.turn_id is None
    await h.control.resume(session.id, receipt.hold_id)
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    turn = await h.control.enqueue(session.id, "new input")
    got = await h.control.receive(session.id, epoch, timeout=0)
    assert got is not None
    assert got.id == turn.id


async def test_interrupting_a_held_session_returns_its_hold(h: Harness) -> None:
    session = await h.session()
    first = await h.control.interrupt(session.id)
    before = await h.last_sequence(session.id)
    second = await h.control.interrupt(session.id)
    assert second == first
    assert await h.last_sequence(session.id) == before


async def test_exact_turn_interrupt_stops_that_turn_and_holds_until_resumed(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, active = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")

    receipt = await h.control.interrupt(session.id, active.id)

    assert (receipt.scope, receipt.turn_id) == ("turn", active.id)
    with pytest.raises(SessionHeld):
        await h.control.send(session.id, "hi")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    turn = await h.control.get_turn(session.id, active.id)
    assert (turn.status, turn.reason) == ("interrupted", "interrupt")
    assert (await h.control.get_turn(session.id, queued.id)).status == "queued"
    await h.control.resume(session.id, receipt.hold_id)
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == queued.id


async def test_exact_turn_interrupt_needs_the_running_turn(h: Harness) -> None:
    session = await h.session()
    queued = await h.control.enqueue(session.id, 1)
    with pytest.raises(TurnNotActive):
        await h.control.interrupt(session.id, queued.id)
    with pytest.raises(NotFound):
        await h.control.interrupt(session.id, "turn_missing")


async def test_a_session_interrupt_during_an_exact_turn_hold_returns_that_hold(
    h: Harness,
) -> None:
    session = await h.session()
    _, active = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    turn_hold = await h.control.interrupt(session.id, active.id)
    assert await h.control.interrupt(session.id) == turn_hold
    assert await h.control.interrupt(session.id, active.id) == turn_hold


async def test_controls_on_a_closed_session_are_refused(h: Harness) -> None:
    session = await h.session()
    await h.control.close(session.id)
    with pytest.raises(SessionNotOpen):
        await h.control.interrupt(session.id)
    with pytest.raises(SessionNotOpen):
        await h.control.enqueue(session.id, 1)
    with pytest.raises(SessionNotOpen):
        await h.control.cancel(session.id)
