"""Session and Turn conditions (issue 12): what each state reads as, and a
lastTransitionTime that moves only when a condition's status does."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_args

from helmr.control import HoldView, StorageLimits
from helmr.operator.mirror.conditions import (
    Observation,
    camel,
    session_observations,
    settle,
    turn_observations,
)
from helmr.states import ErrorInfo, HoldReason
from tests.unit.control.harness import Harness

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def by_type(observed: list[Observation]) -> dict[str, Observation]:
    return {o.type: o for o in observed}


def test_camel_case_reasons() -> None:
    assert camel("turn_deadline_elapsed") == "TurnDeadlineElapsed"
    assert camel("session.execution_lost") == "SessionExecutionLost"


def test_transition_time_kept_while_the_status_holds_and_moved_when_it_changes() -> None:
    first = settle(None, [Observation("Ready", "True", "Idle")], T0, 3)
    assert first[0].last_transition_time == T0
    assert first[0].observed_generation == 3
    later = T0 + timedelta(minutes=5)
    # Same status, another reason: the transition time stays.
    again = settle(first, [Observation("Ready", "True", "RunnerUp")], later, 3)
    assert (again[0].reason, again[0].last_transition_time) == ("RunnerUp", T0)
    flipped = settle(again, [Observation("Ready", "False", "Held")], later)
    assert flipped[0].last_transition_time == later
    # Unknown generation: not sent (exclude_unset), rather than null.
    assert "observedGeneration" not in flipped[0].to_wire()
    # A new condition takes the time the store knows, when it knows one.
    since = T0 + timedelta(seconds=1)
    held = settle(flipped, [Observation("Held", "True", "Interrupted", "", since)], later)
    assert held[0].last_transition_time == since


def test_long_messages_are_cut() -> None:
    (condition,) = settle(None, [Observation("Failed", "True", "Boom", "x" * 40_000)], T0)
    assert len(condition.message) == 1024


async def test_session_conditions_follow_its_life(h: Harness) -> None:
    session = await h.session()
    ready = by_type(session_observations(session, None))
    assert (ready["Ready"].status, ready["Ready"].reason) == ("True", "Idle")
    assert (ready["Held"].status, ready["Held"].reason) == ("False", "NotHeld")
    assert "Closed" not in ready

    await h.control.enqueue(session.id, "queued")
    starting = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (starting["Ready"].status, starting["Ready"].reason) == ("False", "RunnerStarting")

    epoch, turn = await h.running(session.id)
    up = by_type(session_observations(await h.control.get_session(session.id), "pod-1"))
    assert (up["Ready"].status, up["Ready"].reason) == ("True", "RunnerUp")

    receipt = await h.control.interrupt(session.id)
    held = by_type(session_observations(await h.control.get_session(session.id), "pod-1"))
    assert (held["Held"].status, held["Held"].reason) == ("True", "Interrupted")
    assert receipt.hold_id in held["Held"].message
    assert "still stopping" in held["Held"].message
    assert held["Held"].since == receipt.accepted_at
    assert (held["Ready"].status, held["Ready"].reason) == ("False", "Held")

    await h.control.process_exited(session.id, epoch, 0)
    await h.control.resume(session.id, receipt.hold_id)
    await h.control.close(session.id)  # the first Turn enqueued still waits
    closing = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (closing["Closed"].status, closing["Closed"].reason) == ("False", "Closing")
    assert closing["Closed"].message == "close requested: 1 queued Turns still run"
    await h.control.cancel(session.id)
    closed = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (closed["Closed"].status, closed["Closed"].reason) == ("True", "Cancelled")
    assert (closed["Ready"].status, closed["Ready"].reason) == ("False", "Closed")
    assert (await h.control.get_turn(session.id, turn.id)).status == "interrupted"


async def _held_by(h: Harness, reason: HoldReason) -> Observation:
    session = await h.session()
    hold = HoldView(
        hold_id="hold-1",
        reason=reason,
        scope="session",
        turn_id=None,
        created_at=T0,
        converged=True,
    )
    return by_type(session_observations(session.model_copy(update={"hold": hold}), None))["Held"]


async def test_each_hold_reason_reads_as_its_own_reason_and_message(h: Harness) -> None:
    held = {reason: await _held_by(h, reason) for reason in get_args(HoldReason)}
    assert {reason: o.reason for reason, o in held.items()} == {
        "interrupt": "Interrupted",
        "process_failures": "ProcessFailures",
        "recovery_gap": "RecoveryGap",
        "storage_pressure": "StoragePressure",
    }
    assert len({o.message for o in held.values()}) == len(held)
    for observed in held.values():
        assert "Resume with spec.resume.holdId: hold-1" in observed.message
    assert "needs acknowledgement" in held["recovery_gap"].message
    # The disk is only nearly full: nothing was lost.
    pressure = held["storage_pressure"].message
    assert "nearly full" in pressure
    assert "lost" not in pressure
    assert "free space" in pressure


def test_the_docs_list_every_held_reason() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "resources.md").read_text()
    [row] = [line for line in docs.splitlines() if line.startswith("| `Session` | `Held` |")]
    listed = set(re.findall(r"`([A-Z][A-Za-z]+)`", row.split("|")[4]))
    assert listed == {"Interrupted", "ProcessFailures", "RecoveryGap", "StoragePressure", "NotHeld"}


async def test_a_failed_session_says_why(h: Harness) -> None:
    session = await h.session()
    await h.control.fail_session(session.id, "actor_init_failed")
    failed = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (failed["Failed"].status, failed["Failed"].reason) == ("True", "ActorInitFailed")
    assert failed["Failed"].message == "the Session failed: actor init failed"


async def test_a_failure_with_its_detail_has_the_code_alone_as_its_reason(h: Harness) -> None:
    session = await h.session()
    detail = "preparation_exhausted: ErrImagePull: dial tcp 127.0.0.1:1: connection refused"
    await h.control.fail_session(session.id, detail)
    failed = by_type(session_observations(await h.control.get_session(session.id), None))
    assert failed["Failed"].reason == "PreparationExhausted"
    assert "connection refused" in failed["Failed"].message


async def test_turn_conditions_as_a_job_has_them(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    assert turn_observations(turn, "review-1") == []
    done = await h.control.complete(session.id, epoch, turn.id, {"ok": True})
    (complete,) = turn_observations(done, "review-1")
    assert (complete.type, complete.status, complete.reason) == ("Complete", "True", "Completed")
    assert complete.message == "Turn review-1 completed with a result"
    assert complete.since == done.ended_at

    await h.control.enqueue(session.id, "two")
    second = await h.control.receive(session.id, epoch, timeout=0)
    assert second is not None
    error = ErrorInfo(code="handler_error", message="it broke")
    failed = await h.control.fail(session.id, epoch, second.id, error)
    (condition,) = turn_observations(failed, "review-2")
    assert (condition.type, condition.reason) == ("Failed", "HandlerError")
    assert condition.message == "Turn review-2 failed: it broke"


async def test_a_disk_pressure_hold_says_so_and_a_gap_under_it_says_that(h: Harness) -> None:
    session = await h.session()
    mib = 1 << 20
    limits = StorageLimits(capacity_bytes=100 * mib, pause_at=0.9, stop_at=0.98, resolve_at=0.85)
    await h.control.set_storage_limits(session.id, limits)
    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id, "unsaved")
    await h.control.report_storage(session.id, epoch, 95 * mib)
    paused = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (paused["Held"].status, paused["Held"].reason) == ("True", "StoragePressure")
    assert "the Computer disk is nearly full" in paused["Held"].message

    await h.control.execution_lost(session.id, epoch)
    lost = by_type(session_observations(await h.control.get_session(session.id), None))
    assert (lost["Held"].status, lost["Held"].reason) == ("True", "RecoveryGap")
    assert "completed work was lost with the Computer" in lost["Held"].message
