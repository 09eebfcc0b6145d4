"""Preparing a runner process: from ``process_started`` until its container runs.

A process is *preparing* while its ``prepare_deadline_at`` is set (from
``process_started`` until the operator sees its container running). The
operator reports a preparation that cannot succeed (an image that cannot be
pulled, a container that cannot be configured, a pod the apiserver refused,
a pod not running by the deadline) as :func:`failed`: each attempt is one
``session.process_failed`` (reason ``preparation_failed`` with a ``detail``
saying what failed), then the next attempt waits a backoff; the Actor's
``retry.maxAttempts`` consecutive failed preparations fail the Session
(``preparation_exhausted: <detail>``): spec/001, "preparation exhaustion
terminates the Session". They never count toward the process-failure hold.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from helmr.control.config import ControlConfig
from helmr.control.lifecycle import fail_session
from helmr.control.processes import end_process, is_live, outcome
from helmr.control.record import record
from helmr.control.views import ProcessOutcome, load_session
from helmr.events import EventKind
from helmr.protocol.api import SessionView
from helmr.states import FailureReason, InterruptReason
from helmr.store import ReadTx, Tx, sessions

MAX_BACKOFF = timedelta(minutes=5)


def prepared(tx: Tx, session_id: str, epoch: int) -> None:
    """The process's container runs: its preparation succeeded, the count of failed
    ones starts again, and its Run begins: it ends at ``run_deadline_at``, now plus
    the Session's ``maxDurationSeconds`` (if it has one), so preparing does not use
    up the Run. Reports for another epoch, or a second one, change nothing."""
    session = sessions.require(tx, session_id)
    if is_live(session, epoch) and session.prepare_deadline_at is not None:
        run = None if session.limits is None else session.limits.max_run_duration
        sessions.prepared(tx, session_id, None if run is None else tx.now + run)


def failed(
    tx: Tx, config: ControlConfig, session_id: str, epoch: int, detail: str
) -> ProcessOutcome:
    """The process's preparation failed (``detail`` says what: the image, the
    scheduler's message, the apiserver's refusal); its pod must go.

    Recorded: ``session.process_failed`` {processEpoch, reason
    ``preparation_failed``, detail, attempt, maxAttempts, holdId null}. The
    next process starts after a backoff (``retry.backoffSeconds``, doubled
    per consecutive failure, at most five minutes); the last allowed attempt
    failing fails the Session. Ignored (``ignored``) for another epoch or a
    process already running: its end is reported as any process's.
    """
    session = sessions.require(tx, session_id)
    if (
        not is_live(session, epoch)
        or session.prepare_deadline_at is None
        or session.stop_reason is not None  # a stop was asked for: the pod's end is that stop
        # It took a Turn, so it runs (its pod's "started" may not have been seen yet).
        or session.active_turn_id is not None
    ):
        return outcome(tx, session_id, epoch, "ignored", None)
    limits = session.limits
    max_attempts = config.preparation_attempts if limits is None else limits.retry_attempts
    backoff = config.preparation_backoff if limits is None else limits.retry_backoff
    attempt = session.preparation_failures + 1
    end_process(tx, session)
    record(
        tx,
        session_id,
        EventKind.SESSION_PROCESS_FAILED,
        {
            "processEpoch": epoch,
            "reason": InterruptReason.PREPARATION_FAILED,
            "detail": detail,
            "attempt": attempt,
            "maxAttempts": max_attempts,
            "holdId": None,
        },
        subject=epoch,
        epoch=epoch,
    )
    delay = min(backoff * 2 ** (attempt - 1), MAX_BACKOFF)
    sessions.preparation_failed(tx, session_id, attempt, tx.now + delay)
    if attempt >= max_attempts:
        fail_session(tx, session_id, FailureReason.PREPARATION_EXHAUSTED.because(detail))
    return outcome(tx, session_id, epoch, "failed", None)


def overdue(rt: ReadTx, now: datetime) -> list[SessionView]:
    """Sessions whose live process is still preparing at its preparation deadline."""
    return [load_session(rt, s.id) for s in sessions.past_preparation_deadline(rt, now)]
