"""Interrupt and cancel converge before the outcome (spec/001 "Actors, Sessions and Turns").

A stop is accepted at once (the hold, ``session.interrupt``, ``cancel_requested_at``)
while the Turn stays ``running`` and its runner calls are refused; the Turn is
``interrupted`` only once its process has let go of it (its next ``receive``, or
its end), and nothing the old handler writes lands after that.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from helmr.control import ControlConfig
from helmr.errors import HoldNotConverged, ReceiveTimeout, SessionHeld, TurnNotActive
from helmr.events import EventKind
from helmr.states import MessageOutcome
from tests.unit.control.harness import Harness

GRACE = timedelta(seconds=10)


@pytest.fixture
def control_config() -> ControlConfig:
    return ControlConfig(stop_grace=GRACE)


async def interrupted_events(h: Harness, session_id: str) -> list[dict[str, object]]:
    return [
        dict(e.data) if isinstance(e.data, dict) else {}
        for e in await h.events(session_id)
        if e.kind == EventKind.TURN_INTERRUPTED
    ]


async def test_acceptance_precedes_convergence_and_fences_the_old_handler(h: Harness) -> None:
    """001: "`turn.interrupt()` returns a stop receipt and hold identity. Acceptance may
    precede physical convergence." The receipt is recorded at acceptance; the Turn
    stays running, and every runner call for it is refused, until its process lets go."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.messages_ready(session.id, epoch, turn.id)
    waiting = await h.message(session.id, "pending")

    receipt = await h.control.interrupt(session.id, turn.id)

    assert (receipt.turn_id, receipt.scope) == (turn.id, "turn")
    assert (await h.control.get_turn(session.id, turn.id)).status == "running"
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.converged) == (receipt.hold_id, False)
    assert EventKind.TURN_INTERRUPTED not in [e.kind for e in await h.events(session.id)]
    # The old handler is fenced from the acceptance on (the SDK turns this into turn.signal).
    for call in (
        h.control.output(session.id, epoch, turn.id, "late"),
        h.control.respond(session.id, epoch, turn.id, "late"),
        h.control.complete(session.id, epoch, turn.id, "late"),
        h.control.next_message(session.id, epoch, turn.id, timeout=0),
        h.control.report_message(session.id, epoch, turn.id, waiting, MessageOutcome.STARTED),
    ):
        with pytest.raises(TurnNotActive) as refused:
            await call
        assert refused.value.details["reason"] == "interrupt"

    with pytest.raises(ReceiveTimeout):  # letting go: the Session stays held
        await h.control.receive(session.id, epoch, timeout=0)

    ended = await h.control.get_turn(session.id, turn.id)
    assert (ended.status, ended.reason) == ("interrupted", "interrupt")
    events = await h.events(session.id)
    kinds = [e.kind.value for e in events]
    assert kinds.index("session.interrupt") < kinds.index("turn.interrupted")
    assert await interrupted_events(h, session.id) == [
        {"reason": "interrupt", "holdId": receipt.hold_id}
    ]
    rejected = [e.data for e in events if e.kind == EventKind.MESSAGE_REJECTED]
    assert rejected == [{"messageId": waiting, "reason": "turn_interrupted"}]
    # Nothing from the old handler lands after the outcome.
    mark = await h.last_sequence(session.id)
    with pytest.raises(TurnNotActive):
        await h.control.output(session.id, epoch, turn.id, "later")
    with pytest.raises(TurnNotActive):
        await h.control.complete(session.id, epoch, turn.id)
    assert await h.last_sequence(session.id) == mark
    assert (await h.control.get_session(session.id)).hold.converged  # type: ignore[union-attr]


async def test_resume_releases_only_a_converged_hold(h: Harness) -> None:
    """001: "`session.resume({ holdId })` releases that exact converged hold; it never
    replays the interrupted Turn." Before convergence resume is 409 hold_not_converged."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")
    receipt = await h.control.interrupt(session.id)

    with pytest.raises(HoldNotConverged) as refused:
        await h.control.resume(session.id, receipt.hold_id)
    assert (refused.value.status, refused.value.code) == (409, "hold_not_converged")
    assert refused.value.details["turn_id"] == turn.id

    await h.control.process_exited(session.id, epoch, 0)  # its end is letting go too
    await h.control.resume(session.id, receipt.hold_id)
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == queued.id
    assert (await h.control.get_turn(session.id, turn.id)).status == "interrupted"


async def test_an_exact_turn_interrupt_holds_the_session_until_resumed(h: Harness) -> None:
    """001: "Explicit interruption requires resume; infrastructure recovery is automatic."
    An exact-Turn interrupt holds the whole Session like a Session interrupt: after
    convergence nothing runs, and neither the runner's receive nor the process's end
    releases the hold; only ``resume(hold_id)`` does."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")
    receipt = await h.control.interrupt(session.id, turn.id)

    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0)
    with pytest.raises(SessionHeld):
        await h.control.send(session.id, "hi")
    await h.control.process_exited(session.id, epoch, 0)
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.converged) == (receipt.hold_id, True)
    assert await h.control.sessions_needing_runner(h.clock()) == []
    assert "session.resume" not in await h.kinds(session.id)

    await h.control.resume(session.id, receipt.hold_id)

    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == queued.id
    resumes = [e.data for e in await h.events(session.id) if e.kind == EventKind.SESSION_RESUME]
    assert resumes == [{"holdId": receipt.hold_id, "how": "resume"}]


async def test_cancel_interrupts_the_active_turn_after_its_stop_completes(h: Harness) -> None:
    """001: "An active Turn uses the normal `interrupted` outcome after its stop and capture
    complete." Cancel is accepted at once; the Turn ends when its process has ended."""
    session = await h.session()
    epoch, turn = await h.running(session.id)

    accepted = await h.control.cancel(session.id)

    assert accepted.cancel_requested_at is not None
    assert (await h.control.get_turn(session.id, turn.id)).status == "running"
    assert [s.reason for s in await h.control.processes_to_stop()] == ["cancel"]
    with pytest.raises(TurnNotActive):
        await h.control.output(session.id, epoch, turn.id, "late")
    mark = await h.last_sequence(session.id)

    await h.control.process_exited(session.id, epoch, -15)

    ended = await h.control.get_turn(session.id, turn.id)
    assert (ended.status, ended.reason) == ("interrupted", "cancel")
    assert await h.kinds(session.id, after=mark) == [
        "turn.interrupted",
        "session.process_stopped",
        "session.closed",
    ]


async def test_a_runner_that_lets_go_of_a_cancelled_turn_converges_it_at_once(
    h: Harness,
) -> None:
    """001: "An active Turn uses the normal `interrupted` outcome after its stop and capture
    complete": asking for the next Turn is letting go; the runner then gets no more."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.cancel(session.id)

    assert await h.control.receive(session.id, epoch, timeout=0) is None

    ended = await h.control.get_turn(session.id, turn.id)
    assert (ended.status, ended.reason) == ("interrupted", "cancel")
    await h.control.process_exited(session.id, epoch, 0)
    assert (await h.control.get_session(session.id)).status == "closed"
    assert (await h.kinds(session.id)).count("turn.interrupted") == 1


async def test_an_interrupt_accepted_before_a_cancel_keeps_its_reason(h: Harness) -> None:
    """001: interrupt then cancel: the Turn converges once, with the first accepted stop."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    receipt = await h.control.interrupt(session.id, turn.id)
    await h.control.cancel(session.id)
    await h.control.process_exited(session.id, epoch, 0)
    assert await interrupted_events(h, session.id) == [
        {"reason": "interrupt", "holdId": receipt.hold_id}
    ]
    assert (await h.control.get_session(session.id)).status == "closed"


async def test_a_stop_not_let_go_of_converges_once_when_the_process_is_stopped(
    h: Harness,
) -> None:
    """000: "If the harness's work cannot be stopped cleanly after the failure, that counts
    as a process failure": the Turn keeps its reason ``interrupt``, ends once, and the
    forced stop is ``session.process_failed`` (``stop_deadline_elapsed``)."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    receipt = await h.control.interrupt(session.id, turn.id)

    stops = await h.control.expire_deadlines(h.clock.advance(GRACE))
    assert [s.reason for s in stops] == ["stop_deadline_elapsed"]
    assert (await h.control.get_turn(session.id, turn.id)).status == "running"
    outcome = await h.control.execution_lost(session.id, epoch)

    assert outcome.outcome == "failed"
    assert await interrupted_events(h, session.id) == [
        {"reason": "interrupt", "holdId": receipt.hold_id}
    ]
    failed = [e.data for e in await h.events(session.id) if e.kind == "session.process_failed"]
    assert failed == [{"processEpoch": epoch, "reason": "stop_deadline_elapsed", "holdId": None}]


async def test_an_execution_loss_while_stopping_keeps_the_interrupt(h: Harness) -> None:
    """001: "Explicit interruption requires resume; infrastructure recovery is automatic":
    a loss while the interrupted Turn stops converges it once (reason ``interrupt``),
    restores the disk, and the interrupt's hold still needs its resume."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    receipt = await h.control.interrupt(session.id, turn.id)

    outcome = await h.control.execution_lost(session.id, epoch)

    assert outcome.outcome == "lost"
    assert await interrupted_events(h, session.id) == [
        {"reason": "interrupt", "holdId": receipt.hold_id}
    ]
    assert "session.execution_lost" in await h.kinds(session.id)
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.converged) == (receipt.hold_id, True)
    await h.control.resume(session.id, receipt.hold_id)
    assert (await h.control.get_session(session.id)).hold is None


async def test_a_session_failure_while_stopping_ends_the_turn_once(h: Harness) -> None:
    """000: "Helmr never replays a completed, interrupted or failed Turn": a Session that
    fails while a Turn stops ends it once, keeping the accepted stop's reason."""
    session = await h.session()
    epoch, _ = await h.running(session.id)
    await h.control.cancel(session.id)
    await h.control.fail_session(session.id, "actor_missing")
    await h.control.process_exited(session.id, epoch, 0)
    assert await interrupted_events(h, session.id) == [{"reason": "cancel"}]


async def test_a_cancelled_turn_past_its_deadline_still_ends_as_cancelled(h: Harness) -> None:
    """001: the stopping Turn ends once, with the cancel's reason, not its deadline's."""
    session = await h.session(max_turn_duration=timedelta(seconds=5))
    epoch, _ = await h.running(session.id)
    await h.control.cancel(session.id)
    assert await h.control.next_deadline() is None
    assert await h.control.expire_deadlines(h.clock.advance(timedelta(seconds=10))) == []
    await h.control.process_exited(session.id, epoch, 0)
    assert await interrupted_events(h, session.id) == [{"reason": "cancel"}]
    stopped = [e.data for e in await h.events(session.id) if e.kind == "session.process_stopped"]
    assert stopped == [{"processEpoch": epoch, "reason": "cancel"}]
