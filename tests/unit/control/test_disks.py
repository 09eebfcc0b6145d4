"""The Computer disk in the state machine: saves requested with completed Turns,
their progress, and the restore and recovery gap after an execution loss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import JsonValue

from helmr.control import ControlConfig, HoldView, SessionView, StorageLimits
from helmr.control.disks import covered_by_taking, uncommitted
from helmr.errors import Conflict, ReceiveTimeout
from helmr.protocol import ErrorInfo
from helmr.states import SaveStatus
from helmr.store.rows import SaveRow
from tests.unit.control.harness import Harness

MIB = 1 << 20
LIMITS = StorageLimits(capacity_bytes=100 * MIB, pause_at=0.90, stop_at=0.98, resolve_at=0.85)


@pytest.fixture
def control_config() -> ControlConfig:
    return ControlConfig(max_save_attempts=2)


async def _complete(h: Harness, session: SessionView, epoch: int, input: str) -> str:
    """Runs one Turn to completion on ``epoch``; returns its id."""
    await h.control.enqueue(session.id, input)
    turn = await h.control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    await h.control.complete(session.id, epoch, turn.id, {"done": input})
    return turn.id


async def test_a_completed_turn_requests_a_save_and_does_not_wait_for_it(h: Harness) -> None:
    """000 Finalization: the completed outcome commits, then a background disk save is
    requested; the next Turn can run while that save is pending."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    first = await _complete(h, session, epoch, "one")

    assert (await h.control.get_turn(session.id, first)).status == "completed"
    [save] = await h.control.saves_to_step()
    assert (save.version, save.turn_id, save.disk, save.status) == (1, first, 1, "pending")
    view = await h.control.get_workspace("team", session.workspace)
    assert (view.computer_version, view.pending_saves) == (None, 1)
    assert view.held_by == session.id
    # The next Turn runs while the save is pending.
    await h.control.enqueue(session.id, "two")
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.status == "running"


async def test_a_failed_turn_requests_no_save(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.fail(session.id, epoch, turn.id, ErrorInfo(code="boom", message="no"))
    assert await h.control.saves_to_step() == []


async def test_a_ready_save_is_the_committed_computer_version(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "one")

    await h.control.save_ready("team", session.workspace, 1)

    view = await h.control.get_workspace("team", session.workspace)
    assert (view.computer_version, view.pending_saves) == (f"{session.workspace}-save-1", 0)
    assert await h.control.saves_to_step() == []


async def test_a_failed_save_is_retried_then_given_up_without_rerunning_the_turn(
    h: Harness,
) -> None:
    """000: Helmr retries failed saves without rerunning completed handlers."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    turn_id = await _complete(h, session, epoch, "one")

    once = await h.control.save_failed("team", session.workspace, 1, "snapshot failed")
    assert (once.status, once.attempts) == ("pending", 1)
    twice = await h.control.save_failed("team", session.workspace, 1, "snapshot failed")
    assert (twice.status, twice.attempts, twice.error) == ("failed", 2, "snapshot failed")
    assert (await h.control.get_turn(session.id, turn_id)).status == "completed"
    assert await h.control.saves_to_step() == []


async def test_loss_restores_the_last_ready_save_and_holds_for_the_gap(h: Harness) -> None:
    """001: Helmr restores the last committed Computer version after execution loss;
    002: session.recovery_gap names the affected completed requests, with holdId set
    when the conversation is held for acknowledgement."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "saved")
    await h.control.save_ready("team", session.workspace, 1)
    unsaved = await _complete(h, session, epoch, "unsaved")
    await h.control.enqueue(session.id, "interrupted by the loss")
    running = await h.control.receive(session.id, epoch, timeout=0)
    assert running is not None
    queued = await h.control.enqueue(session.id, "never started")
    before = await h.last_sequence(session.id)

    outcome = await h.control.execution_lost(session.id, epoch)

    assert outcome.hold_id is not None
    ws = session.workspace
    events = await h.events(session.id, after=before)
    assert [(e.kind.value, e.data) for e in events] == [
        (
            "turn.interrupted",
            {
                "reason": "computer_execution_lost",
                "computerId": f"{ws}-disk-1",
                "leaseEpoch": epoch,
                "recoveryGap": True,
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
                "computerId": f"{ws}-disk-1",
                "computerVersion": f"{ws}-save-1",
                "savesUnavailable": None,
            },
        ),
        (
            "session.recovery_gap",
            {
                "restorePoint": f"{ws}-save-1",
                "computerId": f"{ws}-disk-1",
                "turnIds": [unsaved],
                "holdId": outcome.hold_id,
            },
        ),
    ]
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (outcome.hold_id, "recovery_gap")
    # The next runner's disk is a new one, restored from the last ready save.
    disk = await h.control.current_disk("team", ws)
    assert (disk.disk, disk.restored_from) == (2, 1)
    view = await h.control.get_workspace("team", ws)
    assert (view.claim_name, view.restored_from) == (f"{ws}-disk-2", f"{ws}-save-1")
    # The lost disk's pending save can no longer commit.
    assert (await h.control.save_ready("team", ws, 2)).status == "lost"
    assert (await h.control.get_workspace("team", ws)).computer_version == f"{ws}-save-1"
    # Held until acknowledged; the queued Turn keeps identity and order; nothing replays.
    assert await h.control.sessions_needing_runner(h.clock()) == []
    await h.control.resume(session.id, outcome.hold_id)
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert (nxt.id, nxt.sequence) == (queued.id, queued.sequence)


async def test_a_given_up_save_is_in_the_gap_too(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    turn_id = await _complete(h, session, epoch, "one")
    for _ in range(2):
        await h.control.save_failed("team", session.workspace, 1, "no snapshot class")

    outcome = await h.control.execution_lost(session.id, epoch)

    [gap] = [e for e in await h.events(session.id) if e.kind == "session.recovery_gap"]
    assert gap.data == {
        "restorePoint": None,
        "computerId": f"{session.workspace}-disk-1",
        "turnIds": [turn_id],
        "holdId": outcome.hold_id,
    }
    disk = await h.control.current_disk("team", session.workspace)
    assert (disk.disk, disk.restored_from) == (2, None)


async def _gap(h: Harness, session_id: str) -> dict[str, JsonValue]:
    """The data of the Session's one ``session.recovery_gap`` event."""
    [gap] = [e.data for e in await h.events(session_id) if e.kind == "session.recovery_gap"]
    assert isinstance(gap, dict)
    return gap


async def _next_session_on_the_workspace(
    h: Harness, earlier: SessionView, epoch: int
) -> tuple[SessionView, int]:
    """Closes ``earlier`` (its process ``epoch`` exits) and opens another Session on
    its Workspace with a process started; that Session and its epoch."""
    await h.control.close(earlier.id)
    await h.control.process_exited(earlier.id, epoch, 0)
    later = await h.control.open_session(
        namespace="team", name="later", actor="reviewer", workspace=earlier.workspace
    )
    return later, await h.control.process_started(later.id)


async def test_a_loss_names_only_this_sessions_turns_not_an_earlier_sessions(
    h: Harness,
) -> None:
    """002: the gap names the affected completed requests *of this conversation*: a
    Turn of an earlier Session on the same Workspace whose save never became ready
    is not this Session's to acknowledge, and does not hold it."""
    earlier = await h.session()
    ws = earlier.workspace
    epoch = await h.control.process_started(earlier.id)
    await _complete(h, earlier, epoch, "given up")
    for _ in range(2):
        await h.control.save_failed("team", ws, 1, "snapshot failed")
    await _complete(h, earlier, epoch, "still pending")
    later, epoch = await _next_session_on_the_workspace(h, earlier, epoch)

    outcome = await h.control.execution_lost(later.id, epoch)

    assert outcome.hold_id is None
    assert (await h.control.get_session(later.id)).hold is None
    assert await _gap(h, later.id) == {
        "restorePoint": None,
        "computerId": f"{ws}-disk-1",
        "turnIds": [],
        "holdId": None,
    }
    # The earlier Session's pending save was of the lost disk: it can no longer commit.
    assert (await h.control.save_ready("team", ws, 2)).status == "lost"


async def test_the_gap_names_this_sessions_unsaved_turns_after_an_earlier_sessions(
    h: Harness,
) -> None:
    earlier = await h.session()
    epoch = await h.control.process_started(earlier.id)
    await _complete(h, earlier, epoch, "unsaved, earlier")
    later, epoch = await _next_session_on_the_workspace(h, earlier, epoch)
    mine = await _complete(h, later, epoch, "unsaved, mine")

    outcome = await h.control.execution_lost(later.id, epoch)

    assert outcome.hold_id is not None
    gap = await _gap(h, later.id)
    assert (gap["turnIds"], gap["holdId"]) == ([mine], outcome.hold_id)


async def _lost_under_hold(
    h: Harness, session_id: str, epoch: int, hold_id: str, unsaved: list[str]
) -> HoldView:
    """Loses the execution of a Session held by ``hold_id``; checks that the
    loss and its gap name that hold and the ``unsaved`` Turns; returns the hold."""
    outcome = await h.control.execution_lost(session_id, epoch)
    assert outcome.hold_id == hold_id
    gap = await _gap(h, session_id)
    assert (gap["turnIds"], gap["holdId"]) == (unsaved, hold_id)
    hold = (await h.control.get_session(session_id)).hold
    assert hold is not None
    assert hold.hold_id == hold_id
    return hold


async def test_a_gap_of_a_session_already_held_names_that_hold(h: Harness) -> None:
    """002: holdId is set when this conversation is held for acknowledgement; a
    Session an interrupt already holds stays under that hold, whose resume
    acknowledges the gap too, and the gap names it (never null)."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    unsaved = await _complete(h, session, epoch, "unsaved")
    receipt = await h.control.interrupt(session.id)

    hold = await _lost_under_hold(h, session.id, epoch, receipt.hold_id, [unsaved])

    assert hold.reason == "interrupt"
    await h.control.resume(session.id, receipt.hold_id)
    assert (await h.control.get_session(session.id)).hold is None


async def test_a_gap_under_a_storage_pressure_hold_makes_it_the_gaps_hold(h: Harness) -> None:
    """A pause's hold is released by itself when the disk empties; once it also
    holds the Session for a recovery gap, it is the gap's hold (reason
    ``recovery_gap``), which only a resume releases."""
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    epoch = await h.control.process_started(session.id)
    unsaved = await _complete(h, session, epoch, "unsaved")
    assert await h.control.report_storage(session.id, epoch, 95 * MIB) == "paused"
    paused = (await h.control.get_session(session.id)).hold
    assert paused is not None

    hold = await _lost_under_hold(h, session.id, epoch, paused.hold_id, [unsaved])

    assert hold.reason == "recovery_gap"
    # The disk empties (the episode resolves): the gap still waits for its resume.
    epoch = await h.control.process_started(session.id)
    assert await h.control.report_storage(session.id, epoch, 10 * MIB) == "resolved"
    still = (await h.control.get_session(session.id)).hold
    assert still is not None
    assert (still.hold_id, still.reason) == (paused.hold_id, "recovery_gap")


async def test_pruning_keeps_the_newest_ready_saves_and_drops_lost_ones(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for n in range(4):
        await _complete(h, session, epoch, f"t{n}")
        await h.control.save_ready("team", session.workspace, n + 1)
    await _complete(h, session, epoch, "lost")
    await h.control.execution_lost(session.id, epoch)

    doomed = await h.control.saves_to_prune("team", session.workspace, 2)
    assert [(s.version, s.status) for s in doomed] == [(2, "ready"), (1, "ready"), (5, "lost")]
    for save in doomed:
        await h.control.save_pruned("team", session.workspace, save.version)
    assert await h.control.saves_to_prune("team", session.workspace, 2) == []
    # Never fewer than the newest ready save, the restore point.
    assert [s.version for s in await h.control.saves_to_prune("team", session.workspace, 0)] == [3]


async def test_a_held_workspace_refuses_a_second_session_and_its_deletion(h: Harness) -> None:
    """A Session holds its Workspace exclusively while open; the hold is released
    once its execution is excluded (its process gone)."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    with pytest.raises(Conflict, match=session.id):
        await h.control.open_session(
            namespace="team", name="other", actor="reviewer", workspace=session.workspace
        )
    with pytest.raises(Conflict, match=session.name):
        await h.control.forget_workspace("team", session.workspace)

    await h.control.close(session.id)
    # Closing, and its process still live: still held.
    with pytest.raises(Conflict):
        await h.control.forget_workspace("team", session.workspace)
    await h.control.process_exited(session.id, epoch, 0)
    assert (await h.control.get_session(session.id)).status == "closed"
    assert (await h.control.get_workspace("team", session.workspace)).held_by is None
    await h.control.forget_workspace("team", session.workspace)
    other = await h.control.open_session(
        namespace="team", name="other", actor="reviewer", workspace=session.workspace
    )
    assert other.status == "open"


# Coalesced saves ------------------------------------------------------------------------------


def _save(version: int, status: SaveStatus = "pending", disk: int = 1) -> SaveRow:
    return SaveRow(
        namespace="team",
        workspace="ws",
        version=version,
        disk=disk,
        session_id="s",
        turn_id=f"t{version}",
        status=status,
        attempts=0,
        error=None,
        requested_at=datetime(2026, 1, 1, tzinfo=UTC),
        ready_at=None,
        covered_by=None,
        taken_at=None,
        cut_at=None,
    )


def test_taking_a_save_covers_the_older_pending_saves_of_its_disk_only() -> None:
    pending = [_save(1, disk=0), _save(2, "failed"), _save(3), _save(4), _save(5)]
    covered = covered_by_taking(pending, pending[3])
    assert [s.version for s in covered] == [3]  # not the other disk's, the given up, the newer
    assert covered_by_taking(pending, pending[0]) == []


def test_uncommitted_saves_are_those_of_the_lost_disk_after_the_restore_point() -> None:
    saves = [
        _save(7, "covered"),
        _save(6, "pending"),
        _save(5, "failed"),
        _save(4, "ready"),
        _save(3, "covered"),  # covered by the ready save 4: committed
        _save(8, "pending", disk=2),  # another disk's
    ]
    assert [s.version for s in uncommitted(saves, 1, 4)] == [7, 6, 5]
    assert [s.version for s in uncommitted(saves, 1, None)] == [7, 6, 5, 3]


async def test_the_newest_pending_save_taken_covers_the_older_ones_and_commits_them(
    h: Harness,
) -> None:
    """Turns completed while a save was being taken share the next one: taking the
    newest covers the older pending saves, and its readiness commits their state."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    turns = [await _complete(h, session, epoch, f"t{n}") for n in range(3)]
    ws = session.workspace

    covered = await h.control.take_save("team", ws, 3)

    assert covered is not None
    assert [(s.version, s.turn_id) for s in covered] == [(1, turns[0]), (2, turns[1])]
    assert [s.version for s in await h.control.saves_to_step()] == [3]
    assert (await h.control.get_workspace("team", ws)).pending_saves == 1
    ready = await h.control.save_ready("team", ws, 3)
    committed = await h.control.covered_saves("team", ws, 3)
    assert [(s.version, s.status, s.covered_by) for s in committed] == [
        (1, "covered", 3),
        (2, "covered", 3),
    ]
    assert {s.ready_at for s in committed} == {ready.ready_at}
    view = await h.control.get_workspace("team", ws)
    assert (view.computer_version, view.pending_saves) == (f"{ws}-save-3", 0)
    # Taking it again (an operator restarted after the snapshot) covers nothing more.
    assert await h.control.take_save("team", ws, 3) == []


async def test_a_newer_save_covers_a_retried_one_and_what_that_one_covered(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for n in range(2):
        await _complete(h, session, epoch, f"t{n}")
    ws = session.workspace
    await h.control.take_save("team", ws, 2)
    await h.control.save_failed("team", ws, 2, "snapshot failed")  # to be taken again
    await _complete(h, session, epoch, "t2")

    covered = await h.control.take_save("team", ws, 3)

    assert covered is not None
    assert [(s.version, s.attempts) for s in covered] == [(2, 1)]
    assert [s.version for s in await h.control.covered_saves("team", ws, 3)] == [1, 2]
    assert await h.control.covered_saves("team", ws, 2) == []


async def test_covered_saves_whose_save_was_not_ready_are_in_the_recovery_gap(
    h: Harness,
) -> None:
    """The restore point stays the last ready save; Turns whose state only a save
    still being taken would have held are in the gap, in order."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "saved")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    unsaved = [await _complete(h, session, epoch, f"u{n}") for n in range(3)]
    await h.control.take_save("team", session.workspace, 4)  # covers 2 and 3; never ready

    outcome = await h.control.execution_lost(session.id, epoch)

    [gap] = [e for e in await h.events(session.id) if e.kind == "session.recovery_gap"]
    assert gap.data == {
        "restorePoint": f"{session.workspace}-save-1",
        "computerId": f"{session.workspace}-disk-1",
        "turnIds": unsaved,
        "holdId": outcome.hold_id,
    }


async def test_covered_saves_whose_save_is_ready_are_restored_not_in_the_gap(
    h: Harness,
) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for n in range(3):
        await _complete(h, session, epoch, f"t{n}")
    await h.control.take_save("team", session.workspace, 3)
    await h.control.save_ready("team", session.workspace, 3)
    after = await _complete(h, session, epoch, "after")

    outcome = await h.control.execution_lost(session.id, epoch)

    [gap] = [e for e in await h.events(session.id) if e.kind == "session.recovery_gap"]
    assert gap.data == {
        "restorePoint": f"{session.workspace}-save-3",
        "computerId": f"{session.workspace}-disk-1",
        "turnIds": [after],
        "holdId": outcome.hold_id,
    }
    disk = await h.control.current_disk("team", session.workspace)
    assert (disk.disk, disk.restored_from) == (2, 3)


# Turn-aligned saves -------------------------------------------------------------------------


async def _aligned(h: Harness) -> tuple[SessionView, int]:
    """A Session whose Workspace's saves are cut at Turns' ends, its process started."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True)
    return session, await h.control.process_started(session.id)


async def _starts(h: Harness, session: SessionView, epoch: int) -> bool:
    """Whether the process is given a Turn now."""
    try:
        return await h.control.receive(session.id, epoch, timeout=0) is not None
    except ReceiveTimeout:
        return False


async def test_the_next_turn_waits_for_the_cut_of_its_predecessors_save(h: Harness) -> None:
    """A save belongs to exactly the state after its Turn: the next Turn is not
    dispatched until the save's point in time is cut, and not later (readiness)."""
    session, epoch = await _aligned(h)
    await _complete(h, session, epoch, "one")
    await h.control.enqueue(session.id, "two")
    assert (await h.control.get_session(session.id)).active_turn_id is None
    assert not await _starts(h, session, epoch)

    assert await h.control.take_save("team", session.workspace, 1) == []
    assert not await _starts(h, session, epoch)  # taken, not cut yet
    cut = await h.control.save_cut("team", session.workspace, 1)
    assert cut is not None
    assert cut.cut_at is not None
    assert cut.status == "pending"
    assert await h.control.save_cut("team", session.workspace, 1) is None  # once
    assert await _starts(h, session, epoch)


async def test_a_ready_or_failed_save_lets_the_next_turn_run(h: Harness) -> None:
    """Readiness implies the cut (a backend that reports only readiness); a failed
    attempt is retried only at a later Turn's end, so nothing waits for it."""
    session, epoch = await _aligned(h)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    await h.control.enqueue(session.id, "two")
    second = await h.control.receive(session.id, epoch, timeout=0)
    assert second is not None
    await h.control.complete(session.id, epoch, second.id, None)
    await h.control.take_save("team", session.workspace, 2)
    await h.control.save_failed("team", session.workspace, 2, "snapshot failed")
    await h.control.enqueue(session.id, "three")
    assert await _starts(h, session, epoch)
    # Save 2 is pending still, but the disk is past its Turn's end: not taken now.
    assert await h.control.take_save("team", session.workspace, 2) is None


async def test_turns_ending_while_a_save_is_taken_run_on_and_the_next_save_covers_them(
    h: Harness,
) -> None:
    """Coalescing: a Turn that completes while another save of the Workspace is
    being taken does not wait; its save is taken at a later Turn's end, covering it."""
    session, epoch = await _aligned(h)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_cut("team", session.workspace, 1)
    await _complete(h, session, epoch, "two")  # save 1 is not ready: 2 does not wait
    third = await _complete(h, session, epoch, "three")
    await h.control.save_ready("team", session.workspace, 1)
    # The disk is at the end of Turn 3, its save the newest: taken, covering save 2.
    await h.control.enqueue(session.id, "four")
    covered = await h.control.take_save("team", session.workspace, 3)
    assert [save.version for save in covered or []] == [2]
    assert not await _starts(h, session, epoch)
    await h.control.save_cut("team", session.workspace, 3)
    assert await _starts(h, session, epoch)
    assert (await h.control.get_turn(session.id, third)).status == "completed"


async def test_a_save_whose_turn_was_followed_by_another_is_not_taken(h: Harness) -> None:
    session, epoch = await _aligned(h)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_cut("team", session.workspace, 1)
    await _complete(h, session, epoch, "two")
    await h.control.enqueue(session.id, "three")
    assert await _starts(h, session, epoch)  # Turn 3 writes now
    await h.control.save_ready("team", session.workspace, 1)
    assert await h.control.take_save("team", session.workspace, 2) is None


async def test_an_execution_loss_waits_for_no_cut(h: Harness) -> None:
    session, epoch = await _aligned(h)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.execution_lost(session.id, epoch)
    hold = (await h.control.get_session(session.id)).hold
    assert hold is not None
    assert hold.reason == "recovery_gap"
    await h.control.resume(session.id, hold.hold_id)
    await h.control.enqueue(session.id, "two")
    assert await _starts(h, session, await h.control.process_started(session.id))


# The save policy ----------------------------------------------------------------------------


async def test_at_most_one_save_per_interval_and_the_turns_between_run_without_waiting(
    h: Harness,
) -> None:
    """``saveIntervalSeconds``: a Turn ending within the interval after the last
    save's cut is not cut (nothing waits); the first ending after it is, and its save
    covers the ones between."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True, timedelta(seconds=60))
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "one")  # no save taken yet: due
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    await _complete(h, session, epoch, "two")
    await h.control.enqueue(session.id, "three")
    assert await _starts(h, session, epoch)  # Turn 2's save is not due: no wait
    assert await h.control.take_save("team", session.workspace, 2) is None
    h.clock.advance(timedelta(seconds=61))
    await h.control.enqueue(session.id, "four")
    # Turn 3 is running: its save is requested at its end, now due, and waited for.
    three = (await h.control.get_session(session.id)).active_turn_id
    assert three is not None
    await h.control.complete(session.id, epoch, three, None)
    assert not await _starts(h, session, epoch)
    covered = await h.control.take_save("team", session.workspace, 3)
    assert [save.version for save in covered or []] == [2]


async def test_the_interval_counts_from_the_last_cut_so_a_slow_cut_does_not_save_every_turn(
    h: Harness,
) -> None:
    """A cut slower than the interval (a loaded snapshot controller): counted from
    when the save was asked for, every Turn's save would be due at its end and every
    next Turn would wait for a cut; counted from the cut, the Turns of the interval
    after it run unsaved and the next save covers them."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True, timedelta(seconds=5))
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    h.clock.advance(timedelta(seconds=20))
    await h.control.save_cut("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    await _complete(h, session, epoch, "two")  # at the cut: not due
    await h.control.enqueue(session.id, "three")
    assert await _starts(h, session, epoch)
    assert await h.control.take_save("team", session.workspace, 2) is None
    h.clock.advance(timedelta(seconds=5))
    three = (await h.control.get_session(session.id)).active_turn_id
    assert three is not None
    await h.control.complete(session.id, epoch, three, None)  # due again: waited for
    await h.control.enqueue(session.id, "four")
    assert not await _starts(h, session, epoch)
    covered = await h.control.take_save("team", session.workspace, 3)
    assert [save.version for save in covered or []] == [2]


async def test_a_session_suspended_or_closed_is_saved_whatever_the_interval(
    h: Harness,
) -> None:
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True, timedelta(hours=1))
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "one")
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    await _complete(h, session, epoch, "two")
    assert await h.control.take_save("team", session.workspace, 2) is None  # not due
    await h.control.process_exited(session.id, epoch, 0)  # suspended idle
    assert await h.control.take_save("team", session.workspace, 2) == []


async def test_pruning_never_deletes_the_save_the_current_disk_is_restored_from(
    h: Harness,
) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await _complete(h, session, epoch, "t1")
    await h.control.save_ready("team", session.workspace, 1)
    await h.control.execution_lost(session.id, epoch)  # the next disk: from save 1
    hold = (await h.control.get_session(session.id)).hold
    if hold is not None:
        await h.control.resume(session.id, hold.hold_id)
    epoch = await h.control.process_started(session.id)
    for n in (2, 3):
        await _complete(h, session, epoch, f"t{n}")
        await h.control.save_ready("team", session.workspace, n)
    doomed = await h.control.saves_to_prune("team", session.workspace, 1)
    assert [s.version for s in doomed] == [2]


# Recovery points ----------------------------------------------------------------------------


async def test_the_recovery_point_lags_since_the_oldest_turn_a_pending_save_holds(
    h: Harness,
) -> None:
    """Covered saves count: their Turns are unsaved until the save covering them is ready."""
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    assert (await h.control.recovery_points()).oldest_unsaved_age == timedelta()
    await _complete(h, session, epoch, "one")
    h.clock.advance(timedelta(seconds=30))
    await _complete(h, session, epoch, "two")
    await h.control.take_save("team", session.workspace, 2)  # covers save 1
    h.clock.advance(timedelta(seconds=10))
    points = await h.control.recovery_points()
    assert (points.oldest_unsaved_age, points.saves_in_flight) == (timedelta(seconds=40), 1)
    await h.control.save_ready("team", session.workspace, 2)
    points = await h.control.recovery_points()
    assert (points.oldest_unsaved_age, points.saves_in_flight) == (timedelta(), 0)
