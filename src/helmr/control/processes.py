"""The operator side: runner processes starting, ending, being lost, overrunning.

A process failure (the process ended on its own while it should not have,
or had to be stopped because it did not let go of an interrupted Turn in
time) counts toward the hold; a requested stop (deadline, close, cancel) and
an execution loss (eviction, node loss) do not. Deadlines are read from the
stored ``deadline_at`` and ``stop_deadline_at``, so they hold across operator
restarts.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import JsonValue

from helmr.control import disks
from helmr.control.config import ControlConfig
from helmr.control.disks import Restore
from helmr.control.lifecycle import (
    active_turn,
    converge_stop,
    fail_session,
    finish_closing,
    interrupt_turn,
)
from helmr.control.record import record
from helmr.control.views import ProcessEnd, ProcessOutcome, ProcessStop, load_session
from helmr.errors import Conflict, SessionNotOpen
from helmr.events import EventKind
from helmr.protocol import ExitCode
from helmr.protocol.api import SessionView
from helmr.states import ENDED_SESSION_STATUSES, FailureReason, InterruptReason, StopReason
from helmr.store import ReadTx, SessionRow, Tx, holds, sessions, turns


def started(tx: Tx, config: ControlConfig, session_id: str) -> int:
    """Registers a new runner process and returns its epoch, which fences every older one.

    Conflict while the previous process is live; SessionNotOpen if the Session ended.

    The process is *preparing* until the operator reports it running
    (:mod:`helmr.control.preparation`): ``prepare_deadline_at`` is now plus
    ``ControlConfig.preparation_timeout``.
    """
    session = sessions.require(tx, session_id)
    if session.status in ENDED_SESSION_STATUSES:
        raise SessionNotOpen(f"session {session_id} is {session.status}; it runs no process")
    if session.process_live:
        raise Conflict(
            f"process epoch {session.process_epoch} of session {session_id} is still live;"
            " report its end (process_exited or execution_lost) first",
            epoch=session.process_epoch,
        )
    epoch = session.process_epoch + 1
    sessions.process_started(tx, session_id, epoch, tx.now + config.preparation_timeout)
    return epoch


def exited(
    tx: Tx,
    config: ControlConfig,
    session_id: str,
    epoch: int,
    exit_code: int,
    *,
    failure: str | None = None,
) -> ProcessOutcome:
    """The process ended: a failure, or a stop (``process_stopped``).

    ``failure`` is the operator's verdict when it knows the end was a failure
    and why (``stop_deadline_elapsed``: a requested stop had to be forced).
    A process stopped because it did not let go of an interrupted Turn in time
    (stop reason ``stop_deadline_elapsed``) failed with that reason, however it
    ended. Otherwise the exit decides: the process failed (``process_failed``)
    if it ended on its own with a nonzero code, or left a Turn running whose
    stop nobody asked for; a stop that was asked for, or a clean exit, is a stop.
    A Turn whose stop was accepted (interrupt, cancel) converges now, keeping
    that reason, whatever the process's end is counted as.

    A failure interrupts the running Turn and counts; the count reaching the
    limit holds the Session (``process_failures``). A process that could not load its actor
    (``ExitCode.INIT_FAILED``) is a known initialization failure: it fails
    the Session (``actor_init_failed``) instead of starting another process.
    Reports for another epoch are ignored.
    """
    session = sessions.require(tx, session_id)
    if not is_live(session, epoch):
        return outcome(tx, session_id, epoch, "ignored", None)
    turn = active_turn(tx, session)
    # With the process gone it has let go: a Turn whose stop was accepted ends now.
    left_running = turn is not None and converge_stop(tx, session) is None
    if failure is None and session.stop_reason == StopReason.STOP_DEADLINE_ELAPSED:
        failure = StopReason.STOP_DEADLINE_ELAPSED
    failed = failure is not None or left_running or (session.stop_reason is None and exit_code != 0)
    reason = failure or InterruptReason.PROCESS_FAILED
    end_process(tx, session)
    if turn is not None and left_running:
        interrupt_turn(tx, turn, reason, processEpoch=epoch)
    hold_id = _count_failure(tx, config, session_id) if failed else None
    data: dict[str, JsonValue] = {"processEpoch": epoch}
    if failed:
        kind, data = EventKind.SESSION_PROCESS_FAILED, data | {"reason": reason, "holdId": hold_id}
    else:
        stopped_for = session.stop_reason or StopReason.EXITED
        kind, data = EventKind.SESSION_PROCESS_STOPPED, data | {"reason": stopped_for}
    record(tx, session_id, kind, data, subject=epoch, epoch=epoch)
    finish_closing(tx, session_id)
    ended = sessions.require(tx, session_id).status in ENDED_SESSION_STATUSES
    if failed and exit_code == ExitCode.INIT_FAILED and not ended:
        fail_session(tx, session_id, FailureReason.ACTOR_INIT_FAILED)
    return outcome(tx, session_id, epoch, "failed" if failed else "stopped", hold_id)


def execution_lost(
    tx: Tx,
    config: ControlConfig,
    session_id: str,
    epoch: int,
    *,
    saves_unavailable: str | None = None,
) -> ProcessOutcome:
    """The process's execution was lost (eviction, deleted pod, node loss), and
    with it the disk it wrote: reported once the old pod is gone, so the old
    writer is physically excluded.

    A running Turn whose interrupt was accepted converges with reason
    ``interrupt``; otherwise it is interrupted by the loss. The next runner
    gets a disk restored from the last ready save
    (:func:`helmr.control.disks.lose_disk`). Recorded, in order: the running
    Turn ``interrupted`` (``computer_execution_lost`` with ``computerId``,
    ``leaseEpoch`` and ``recoveryGap``), ``session.process_failed`` (reason
    ``execution_lost``; counted toward the loss limit, never toward the
    process-failure hold: infrastructure recovery is automatic),
    ``session.execution_lost`` (the selected saved version, and
    ``savesUnavailable``: why the cluster cannot save this disk, when the
    operator knows it cannot; null otherwise) and
    ``session.recovery_gap``: the completed Turns whose saves were not ready,
    whose files may be missing. When there are any, the Session is held for
    acknowledgement (reason ``recovery_gap``) until ``resume(hold_id)``.
    Queued Turns keep identity and order. ``max_execution_losses`` consecutive
    losses fail the Session.
    """
    session = sessions.require(tx, session_id)
    if not is_live(session, epoch):
        return outcome(tx, session_id, epoch, "ignored", None)
    if session.stop_reason is not None:
        # The pod went away because a stop was asked for: that is the stop
        # converging, not a loss (its exit code may never be seen). A forced
        # stop (stop_deadline_elapsed) stays a failure.
        return exited(tx, config, session_id, epoch, 0)
    turn = active_turn(tx, session)
    # A stop accepted before the loss (an interrupt) converges with its own reason.
    stopped = converge_stop(tx, session)
    end_process(tx, session)
    restore = disks.lose_disk(tx, session)
    hold_id = _hold_for_gap(tx, session_id) if restore.gap else None
    if turn is not None and stopped is None:
        interrupt_turn(
            tx,
            turn,
            InterruptReason.COMPUTER_EXECUTION_LOST,
            computerId=restore.computer_id,
            leaseEpoch=epoch,
            recoveryGap=hold_id is not None,
        )
    _record_loss(tx, session_id, epoch, restore, hold_id, saves_unavailable)
    _count_loss(tx, config, session)
    return outcome(tx, session_id, epoch, "lost", hold_id)


def _count_loss(tx: Tx, config: ControlConfig, session: SessionRow) -> None:
    """One more execution loss in a row: a closing Session may close now, and
    ``max_execution_losses`` of them fail it."""
    losses = session.consecutive_losses + 1
    sessions.execution_losses(tx, session.id, losses)
    finish_closing(tx, session.id)
    if (
        losses >= config.max_execution_losses
        and sessions.require(tx, session.id).status not in ENDED_SESSION_STATUSES
    ):
        fail_session(tx, session.id, FailureReason.EXECUTION_LOST)


def _record_loss(
    tx: Tx,
    session_id: str,
    epoch: int,
    restore: Restore,
    hold_id: str | None,
    saves_unavailable: str | None,
) -> None:
    """The loss's three facts, in order: the process failed, the execution was lost
    (and what it is restored from), and the recovery gap (the Turns it may miss)."""
    facts: list[tuple[EventKind, dict[str, JsonValue]]] = [
        (
            EventKind.SESSION_PROCESS_FAILED,
            {"processEpoch": epoch, "reason": FailureReason.EXECUTION_LOST, "holdId": None},
        ),
        (
            EventKind.SESSION_EXECUTION_LOST,
            {
                "processEpoch": epoch,
                "computerId": restore.computer_id,
                "computerVersion": restore.restore_point,
                "savesUnavailable": saves_unavailable,
            },
        ),
        (
            EventKind.SESSION_RECOVERY_GAP,
            {
                "restorePoint": restore.restore_point,
                "computerId": restore.computer_id,
                "turnIds": list(restore.gap),
                "holdId": hold_id,
            },
        ),
    ]
    for kind, data in facts:
        record(tx, session_id, kind, data, subject=epoch, epoch=epoch)


def _hold_for_gap(tx: Tx, session_id: str) -> str:
    """Holds the Session until the recovery gap is acknowledged (``resume``);
    returns the hold, which the ``session.recovery_gap`` event names.

    A Session already held stays under that hold, whose resume then
    acknowledges the gap too. A disk pressure hold becomes the gap's
    (reason ``recovery_gap``): the episode resolving releases only a hold of
    its own reason, and the gap still needs its resume.
    """
    session = sessions.require(tx, session_id)
    if session.hold is not None:
        if session.hold.reason == "storage_pressure":
            holds.set_reason(tx, session.hold.id, "recovery_gap")
        return session.hold.id
    hold = holds.insert(tx, session_id, reason="recovery_gap", scope="session", turn_id=None)
    sessions.hold(tx, session_id, hold.id)
    return hold.id


def expire_deadlines(tx: Tx, now: datetime) -> list[ProcessStop]:
    """Interrupts running Turns past ``deadline_at`` and asks their processes to stop;
    asks processes past ``stop_deadline_at`` (an interrupted Turn not let go of) to
    stop too, with reason ``stop_deadline_elapsed``: their end is a process failure."""
    stops: list[ProcessStop] = []
    for listed in turns.past_deadline(tx, now):
        # Read again under its Session's lock (PostgreSQL: the listing locked nothing),
        # as it is now: a settlement committed since the listing stands.
        tx.lock(listed.session_id)
        turn = turns.require(tx, listed.session_id, listed.id)
        if turn.status != "running" or turn.deadline_at is None or turn.deadline_at > now:
            continue
        interrupt_turn(tx, turn, InterruptReason.TURN_DEADLINE_ELAPSED)
        session = sessions.require(tx, turn.session_id)
        if is_live(session, turn.epoch):
            stops.append(_stop(tx, session, StopReason.TURN_DEADLINE_ELAPSED))
        finish_closing(tx, session.id)
    for session in sessions.past_stop_deadline(tx, now):
        stops.append(_stop(tx, session, StopReason.STOP_DEADLINE_ELAPSED, overdue=True))
    # A Run past its maxDuration holding a Turn stops when it asks for the next
    # one (turns.take_next); one waiting for work is stopped now.
    for session in sessions.idle_past_run_deadline(tx, now):
        stops.append(_stop(tx, session, StopReason.RUN_DURATION_ELAPSED))
    return stops


def _stop(tx: Tx, session: SessionRow, reason: StopReason, *, overdue: bool = False) -> ProcessStop:
    """Asks the Session's live process to stop for ``reason``: the stop the operator makes."""
    sessions.ask_stop(tx, session.id, reason, overdue=overdue)
    return ProcessStop(session_id=session.id, epoch=session.process_epoch, reason=reason)


def replace_between_turns(tx: Tx, session_id: str, epoch: int) -> ProcessStop | None:
    """Asks process ``epoch`` to stop because its code changed (``helmr dev``), if it
    holds no Turn now: a stop asked for stops its ``receive`` too, so it takes no
    other Turn meanwhile. None when it holds one (asked again after that Turn) or
    has ended."""
    session = sessions.require(tx, session_id)
    if not is_live(session, epoch) or session.stop_reason is not None:
        return None
    if session.active_turn_id is not None:
        return None
    return _stop(tx, session, StopReason.CODE_CHANGED)


def next_deadline(rt: ReadTx) -> datetime | None:
    """The earliest running Turn's ``deadline_at``, or live process's ``stop_deadline_at``
    or ``run_deadline_at``."""
    due = (turns.next_deadline(rt), sessions.next_stop_deadline(rt), sessions.next_run_deadline(rt))
    return min((d for d in due if d is not None), default=None)


def to_stop(rt: ReadTx) -> list[ProcessStop]:
    """Every live process that has been asked to stop and has not ended yet."""
    return [
        ProcessStop(session_id=s.id, epoch=s.process_epoch, reason=s.stop_reason or "")
        for s in sessions.stopping(rt)
    ]


def needing_runner(rt: ReadTx, now: datetime) -> list[SessionView]:
    """Open or closing Sessions with queued work, no hold, no live process, and no
    backoff after a failed preparation running at ``now``."""
    return [load_session(rt, session.id) for session in sessions.needing_runner(rt, now)]


def needs_runner(rt: ReadTx, session_id: str, now: datetime) -> SessionView | None:
    """The Session, if :func:`needing_runner` lists it (one just given work)."""
    row = sessions.needs_runner(rt, session_id, now)
    return None if row is None else load_session(rt, row.id)


def live(rt: ReadTx) -> list[SessionView]:
    """Sessions whose runner process is live (to check against pods after a restart)."""
    return [load_session(rt, session.id) for session in sessions.live(rt)]


def is_live(session: SessionRow, epoch: int | None) -> bool:
    return session.process_live and session.process_epoch == epoch


def end_process(tx: Tx, session: SessionRow) -> None:
    sessions.process_ended(tx, session.id)


def _count_failure(tx: Tx, config: ControlConfig, session_id: str) -> str | None:
    """Counts one process failure; returns the hold it caused, if it caused one."""
    session = sessions.require(tx, session_id)
    count = session.consecutive_failures + 1
    hold_id = None
    if count >= config.max_process_failures and session.hold is None:
        hold_id = holds.insert(
            tx, session_id, reason="process_failures", scope="session", turn_id=None
        ).id
    sessions.process_failures(tx, session_id, count, hold_id)
    return hold_id


def outcome(
    tx: Tx,
    session_id: str,
    epoch: int,
    outcome: ProcessEnd,
    hold_id: str | None,
) -> ProcessOutcome:
    return ProcessOutcome(
        session_id=session_id,
        epoch=epoch,
        outcome=outcome,
        hold_id=hold_id,
        session_status=sessions.require(tx, session_id).status,
    )
