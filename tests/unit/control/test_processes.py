"""The operator side: epochs, process failures and holds, execution loss, deadlines."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from pydantic import JsonValue

from helmr.control import ControlConfig
from helmr.errors import Conflict, InvalidInput, SessionNotOpen, StaleEpoch
from helmr.events import EventKind
from helmr.protocol import ExitCode
from helmr.store import turns as store_turns
from tests.compose import Clock
from tests.unit.control.harness import Harness


async def test_each_process_gets_a_new_epoch_that_fences_the_old_one(h: Harness) -> None:
    session = await h.session()
    first = await h.control.process_started(session.id)
    with pytest.raises(Conflict):
        await h.control.process_started(session.id)
    await h.control.process_exited(session.id, first, 0)
    second = await h.control.process_started(session.id)
    assert second == first + 1
    with pytest.raises(StaleEpoch):
        await h.control.receive(session.id, first, timeout=0)
    state = await h.control.get_session(session.id)
    assert (state.process_epoch, state.process_live) == (second, True)


async def test_a_process_failure_interrupts_the_running_turn_and_counts(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")

    outcome = await h.control.process_exited(session.id, epoch, 1)

    assert (outcome.outcome, outcome.hold_id) == ("failed", None)
    interrupted = await h.control.get_turn(session.id, turn.id)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "process_failed")
    events = await h.events(session.id, after=3)
    assert [(e.kind.value, e.data) for e in events] == [
        ("turn.interrupted", {"reason": "process_failed", "processEpoch": epoch}),
        (
            "session.process_failed",
            {"processEpoch": epoch, "reason": "process_failed", "holdId": None},
        ),
    ]
    state = await h.control.get_session(session.id)
    assert (state.consecutive_failures, state.hold, state.process_live) == (1, None, False)
    # The next queued Turn runs on a new process.
    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert (nxt.id, nxt.epoch) == (queued.id, new_epoch)


async def test_three_consecutive_process_failures_hold_the_session(h: Harness) -> None:
    session = await h.session()
    for n in range(1, 4):
        epoch, _ = await h.running(session.id)
        outcome = await h.control.process_exited(session.id, epoch, 137)
        assert outcome.outcome == "failed"
        assert (outcome.hold_id is not None) == (n == 3)
    await h.control.enqueue(session.id, "waiting")
    state = await h.control.get_session(session.id)
    assert state.consecutive_failures == 3
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (outcome.hold_id, "process_failures")
    failures = [e for e in await h.events(session.id) if e.kind == "session.process_failed"]
    assert [e.data for e in failures] == [
        {
            "processEpoch": n,
            "reason": "process_failed",
            "holdId": outcome.hold_id if n == 3 else None,
        }
        for n in (1, 2, 3)
    ]
    assert await h.control.sessions_needing_runner(h.clock()) == []

    resumed = await h.control.resume(session.id, state.hold.hold_id)
    assert (resumed.hold, resumed.consecutive_failures) == (None, 0)
    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]


async def test_a_completed_turn_resets_the_failure_count(h: Harness) -> None:
    session = await h.session()
    for _ in range(2):
        epoch, _ = await h.running(session.id)
        await h.control.process_exited(session.id, epoch, 1)
    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id)
    assert (await h.control.get_session(session.id)).consecutive_failures == 0
    await h.control.process_exited(session.id, epoch, 1)
    assert (await h.control.get_session(session.id)).consecutive_failures == 1


async def test_a_clean_exit_without_a_turn_is_a_stop_not_a_failure(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    outcome = await h.control.process_exited(session.id, epoch, 0)
    assert outcome.outcome == "stopped"
    assert (await h.events(session.id))[-1].data == {"processEpoch": epoch, "reason": "exited"}
    assert (await h.control.get_session(session.id)).consecutive_failures == 0


async def test_leaving_a_turn_running_is_a_failure_even_with_exit_code_zero(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    outcome = await h.control.process_exited(session.id, epoch, 0)
    assert outcome.outcome == "failed"
    assert (await h.control.get_turn(session.id, turn.id)).status == "interrupted"


async def test_a_forced_stop_is_a_failure_with_the_reason_given(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await h.control.close(session.id)  # asks the idle process to stop
    outcome = await h.control.process_exited(session.id, epoch, -9, failure="stop_deadline_elapsed")
    assert outcome.outcome == "failed"
    failed = [e for e in await h.events(session.id) if e.kind == "session.process_failed"]
    assert [e.data for e in failed] == [
        {"processEpoch": epoch, "reason": "stop_deadline_elapsed", "holdId": None}
    ]
    assert (await h.control.get_session(session.id)).status == "closed"


async def test_repeated_or_stale_process_reports_are_ignored(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)
    assert (await h.control.process_exited(session.id, epoch, 1)).outcome == "failed"
    before = await h.last_sequence(session.id)
    assert (await h.control.process_exited(session.id, epoch, 1)).outcome == "ignored"
    assert (await h.control.execution_lost(session.id, epoch)).outcome == "ignored"
    assert await h.last_sequence(session.id) == before
    assert (await h.control.get_session(session.id)).consecutive_failures == 1


async def test_execution_loss_is_not_a_process_failure(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")

    outcome = await h.control.execution_lost(session.id, epoch)

    assert (outcome.outcome, outcome.hold_id) == ("lost", None)
    interrupted = await h.control.get_turn(session.id, turn.id)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "computer_execution_lost")
    events = await h.events(session.id, after=3)
    lost_disk = f"{session.workspace}-disk-1"
    assert [(e.kind.value, e.data) for e in events] == [
        (
            "turn.interrupted",
            {
                "reason": "computer_execution_lost",
                "computerId": lost_disk,
                "leaseEpoch": epoch,
                "recoveryGap": False,
            },
        ),
        (
            "session.process_failed",
            {"processEpoch": epoch, "reason": "execution_lost", "holdId": None},
        ),
        (
            "session.execution_lost",
            {
                "processEpoch": epoch,
                "computerId": lost_disk,
                "computerVersion": None,
                "savesUnavailable": None,
            },
        ),
        (
            "session.recovery_gap",
            {"restorePoint": None, "computerId": lost_disk, "turnIds": [], "holdId": None},
        ),
    ]
    state = await h.control.get_session(session.id)
    assert (state.consecutive_failures, state.hold, state.status) == (0, None, "open")
    # Never-started queued Turns keep identity and order for a new process.
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert (nxt.id, nxt.sequence) == (queued.id, queued.sequence)


async def test_repeated_execution_loss_fails_the_session(tmp_path: Path) -> None:
    config = ControlConfig(max_execution_losses=2)
    async with Harness.open(tmp_path / "helmr.db", config=config) as h:
        session = await h.session()
        for _ in range(2):
            epoch, _ = await h.running(session.id)
            await h.control.execution_lost(session.id, epoch)
        queued = await h.control.get_session(session.id)
        assert (queued.status, queued.failure_reason) == ("failed", "execution_lost")
        assert queued.queued_turns == 0
        with pytest.raises(SessionNotOpen):
            await h.control.process_started(session.id)
        assert await h.control.sessions_needing_runner(h.clock()) == []


async def test_fail_session_cancels_queued_work_and_stops_the_process(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, 2)
    failed = await h.control.fail_session(session.id, "init_failed")
    assert (failed.status, failed.failure_reason) == ("failed", "init_failed")
    cancelled = await h.control.get_turn(session.id, queued.id)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "session_failed")
    assert (await h.control.get_turn(session.id, turn.id)).reason == "session_failed"
    stops = await h.control.processes_to_stop()
    assert [(s.session_id, s.epoch, s.reason) for s in stops] == [
        (session.id, epoch, "session_failed")
    ]
    assert await h.control.receive(session.id, epoch, timeout=0) is None
    assert (await h.control.process_exited(session.id, epoch, 0)).outcome == "stopped"
    # The Workspace is free once the process is gone.
    reopened = await h.control.open_session(
        namespace="team", name="again", actor="x", workspace=failed.workspace
    )
    assert reopened.id != session.id


async def test_an_overrunning_turn_is_interrupted_and_its_process_stopped(h: Harness) -> None:
    session = await h.session(max_turn_duration=timedelta(seconds=60))
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")
    assert await h.control.next_deadline() == h.clock.now + timedelta(seconds=60)
    assert await h.control.expire_deadlines(h.clock.now + timedelta(seconds=59)) == []

    stops = await h.control.expire_deadlines(h.clock.advance(timedelta(seconds=60)))

    assert [(s.session_id, s.epoch, s.reason) for s in stops] == [
        (session.id, epoch, "turn_deadline_elapsed")
    ]
    interrupted = await h.control.get_turn(session.id, turn.id)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "turn_deadline_elapsed")
    assert (await h.events(session.id))[-1].data == {"reason": "turn_deadline_elapsed"}
    assert await h.control.next_deadline() is None
    # The old process gets no more Turns; its end is a stop, not a failure.
    assert await h.control.receive(session.id, epoch, timeout=0) is None
    outcome = await h.control.process_exited(session.id, epoch, -15)
    assert outcome.outcome == "stopped"
    last = (await h.events(session.id))[-1]
    assert (last.kind, last.data) == (
        EventKind.SESSION_PROCESS_STOPPED,
        {"processEpoch": epoch, "reason": "turn_deadline_elapsed"},
    )
    assert (await h.control.get_session(session.id)).consecutive_failures == 0
    # The next queued Turn runs on a new process.
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert nxt.id == queued.id


async def test_a_turn_settled_after_the_deadlines_were_listed_stays_settled(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing of Turns past their deadline locks nothing (PostgreSQL): a Turn its
    runner completed between the listing and the interruption keeps its outcome (one
    terminal event), and its process is not stopped for it."""
    session = await h.session(max_turn_duration=timedelta(seconds=60))
    epoch, turn = await h.running(session.id)
    late = h.clock.advance(timedelta(seconds=61))
    listed = await h.store.read(partial(store_turns.past_deadline, now=late))
    assert [t.id for t in listed] == [turn.id]
    await h.control.complete(session.id, epoch, turn.id, "done")
    monkeypatch.setattr(store_turns, "past_deadline", lambda rt, now: listed)

    assert await h.control.expire_deadlines(late) == []

    assert (await h.control.get_turn(session.id, turn.id)).status == "completed"
    ended = [e.kind for e in await h.events(session.id) if e.turn_id == turn.id][2:]
    assert ended == [EventKind.TURN_COMPLETED]


async def test_deadlines_survive_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "helmr.db"
    async with Harness.open(path, clock=clock) as before:
        session = await before.session(max_turn_duration=timedelta(minutes=1))
        _, turn = await before.running(session.id)
    clock.advance(timedelta(minutes=2))
    async with Harness.open(path, clock=clock) as after:
        stops = await after.control.expire_deadlines(clock.now)
        assert [s.session_id for s in stops] == [session.id]
        interrupted = await after.control.get_turn(session.id, turn.id)
        assert interrupted.reason == "turn_deadline_elapsed"


async def test_sessions_needing_runner_have_queued_work_no_hold_and_no_process(
    h: Harness,
) -> None:
    idle = await h.session()
    waiting = await h.session()
    held = await h.session()
    served = await h.session()
    for session in (waiting, held, served):
        await h.control.enqueue(session.id, 1)
    await h.control.interrupt(held.id)
    await h.control.process_started(served.id)
    needing = await h.control.sessions_needing_runner(h.clock())
    assert [s.id for s in needing] == [waiting.id]
    assert needing[0].queued_turns == 1
    assert idle.id not in [s.id for s in needing]


async def test_reported_facts_are_recorded_once_per_subject(h: Harness) -> None:
    session = await h.session()
    gap: JsonValue = {"restorePoint": "snap-7", "holdId": None}
    first = await h.control.record_event(
        session.id, EventKind.SESSION_RECOVERY_GAP, gap, subject="loss-1"
    )
    again = await h.control.record_event(
        session.id, EventKind.SESSION_RECOVERY_GAP, gap, subject="loss-1"
    )
    assert again == first
    assert first.id == f"{session.id}:session.recovery_gap:loss-1"
    with pytest.raises(InvalidInput):
        await h.control.record_event(session.id, EventKind.TURN_COMPLETED, {}, subject="t")


async def test_a_process_that_cannot_load_its_actor_fails_the_session(h: Harness) -> None:
    session = await h.session()
    queued = await h.control.enqueue(session.id, "never runs")
    epoch = await h.control.process_started(session.id)

    outcome = await h.control.process_exited(session.id, epoch, ExitCode.INIT_FAILED)

    assert (outcome.outcome, outcome.session_status) == ("failed", "failed")
    state = await h.control.get_session(session.id)
    assert (state.status, state.failure_reason, state.hold) == (
        "failed",
        "actor_init_failed",
        None,
    )
    cancelled = await h.control.get_turn(session.id, queued.id)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "session_failed")
    assert await h.control.sessions_needing_runner(h.clock()) == []
    last = (await h.events(session.id))[-2:]
    assert [e.kind for e in last] == [EventKind.SESSION_PROCESS_FAILED, EventKind.TURN_CANCELLED]


async def test_an_init_failure_after_a_requested_stop_is_only_a_stop(h: Harness) -> None:
    session = await h.session()
    await h.control.enqueue(session.id, "work")
    epoch = await h.control.process_started(session.id)
    await h.control.close(session.id)
    await h.control.cancel(session.id)  # asks the process to stop
    outcome = await h.control.process_exited(session.id, epoch, ExitCode.INIT_FAILED)
    assert (outcome.outcome, outcome.session_status) == ("stopped", "closed")
