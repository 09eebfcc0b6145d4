"""Transitions several controls share: ending Turns, settling, closing, failing.

Every function runs inside the caller's write transaction, so a state change
and the events that record it commit together.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import JsonValue

from helmr.control import computer
from helmr.control.record import record
from helmr.events import EventKind
from helmr.store import SessionRow, TurnRow, Tx, holds, messages, sessions, turns

Ending = Literal["completed", "failed", "interrupted", "cancelled"]

_KIND: dict[Ending, EventKind] = {
    "completed": EventKind.TURN_COMPLETED,
    "failed": EventKind.TURN_FAILED,
    "interrupted": EventKind.TURN_INTERRUPTED,
    "cancelled": EventKind.TURN_CANCELLED,
}


def active_turn(tx: Tx, session: SessionRow) -> TurnRow | None:
    if session.active_turn_id is None:
        return None
    return turns.require(tx, session.id, session.active_turn_id)


def end_turn(
    tx: Tx,
    turn: TurnRow,
    status: Ending,
    data: dict[str, JsonValue],
    *,
    reason: str | None = None,
) -> TurnRow:
    """Moves a queued or running Turn to a terminal status, once, and records it."""
    reject_waiting_messages(tx, turn, reason=f"turn_{status}")
    changes: dict[str, object] = {
        "status": status,
        "ended_at": tx.now,
        "settling": None,
        "reason": reason,
    }
    if status != "completed":
        # A response is delivered only with a successful outcome.
        changes |= {"has_response": False, "response": None}
    turn = turns.update(tx, turn, **changes)
    record(
        tx,
        turn.session_id,
        _KIND[status],
        data,
        subject=turn.id,
        turn_id=turn.id,
        epoch=turn.epoch,
    )
    session = sessions.require(tx, turn.session_id)
    if session.active_turn_id == turn.id:
        sessions.update(tx, session.id, active_turn_id=None)
    if status == "completed":
        sessions.update(tx, session.id, consecutive_failures=0, consecutive_losses=0)
        # In the transaction that commits the outcome: a crash cannot lose the request.
        computer.request_save(tx, turn)
    return turn


def interrupt_turn(tx: Tx, turn: TurnRow, reason: str, **details: JsonValue) -> TurnRow:
    return end_turn(tx, turn, "interrupted", {"reason": reason, **details}, reason=reason)


def await_release(tx: Tx, turn: TurnRow, grace: timedelta) -> None:
    """Gives the live process ``grace`` to let go of ``turn``, just interrupted on it.

    Letting go is the process's next ``receive`` or its end; either clears
    ``stop_deadline_at``. Past it, ``expire_deadlines`` asks for the process to
    stop (``stop_deadline_elapsed``), and its end counts as a process failure.
    A stop asked for meanwhile (cancel, close) supersedes the deadline; an
    earlier deadline stands.
    """
    session = sessions.require(tx, turn.session_id)
    if (
        session.process_live
        and session.process_epoch == turn.epoch
        and session.stop_deadline_at is None
    ):
        sessions.update(tx, session.id, stop_deadline_at=tx.now + grace)


def cancel_queued(tx: Tx, session_id: str, *, reason: str | None) -> None:
    data: dict[str, JsonValue] = {} if reason is None else {"reason": reason}
    for turn in turns.queued(tx, session_id):
        end_turn(tx, turn, "cancelled", data, reason=reason)


def settle_if_drained(tx: Tx, turn: TurnRow) -> TurnRow:
    """Commits a settling Turn's outcome once no started message handler is pending.

    Settlement waits for callbacks already running (``started``); messages
    whose handler never started were rejected when settlement began.
    """
    if turn.settling is None or messages.with_status(tx, turn.id, "started"):
        return turn
    if turn.settling == "completed":
        data: dict[str, JsonValue] = {
            "hasResult": turn.has_result,
            "hasResponse": turn.has_response,
        }
        turn = end_turn(tx, turn, "completed", data)
    else:
        turn = end_turn(tx, turn, "failed", {"error": turn.error})
    finish_closing(tx, turn.session_id)
    return turn


def finish_closing(tx: Tx, session_id: str) -> None:
    """Closes a closing Session once its work has drained and its process is gone.

    While the process is still live it is asked to stop first: a Session is
    ``closed`` only after its execution is excluded, so its Workspace is free.
    """
    session = sessions.require(tx, session_id)
    if (
        session.status != "closing"
        or session.active_turn_id is not None
        or turns.count_queued(tx, session_id)
    ):
        return
    if session.process_live:
        if session.stop_reason is None:
            sessions.update(tx, session_id, stop_reason=session.close_how)
        return
    if session.hold is not None:
        holds.release(tx, session.hold.id, how="closed")
    sessions.update(tx, session_id, status="closed", closed_at=tx.now, hold_id=None)
    record(tx, session_id, EventKind.SESSION_CLOSED, {"how": session.close_how}, subject=None)


def release_converged_hold(tx: Tx, session: SessionRow) -> None:
    """Ends an exact-Turn interrupt's hold: the interrupted processing has stopped."""
    hold = session.hold
    if hold is None or hold.scope != "turn":
        return
    holds.release(tx, hold.id, how="converged")
    sessions.update(tx, session.id, hold_id=None)
    record(
        tx,
        session.id,
        EventKind.SESSION_RESUME,
        {"holdId": hold.id, "how": "converged"},
        subject=hold.id,
    )


def fail_session(tx: Tx, session_id: str, reason: str) -> None:
    """Terminates the Session: nothing more runs in it.

    Queued Turns are cancelled (reason ``session_failed``) rather than left
    queued forever; a running Turn is interrupted. A live process is asked
    to stop; the Workspace stays owned until it is gone.
    """
    session = sessions.require(tx, session_id)
    cancel_queued(tx, session_id, reason="session_failed")
    turn = active_turn(tx, session)
    if turn is not None:
        interrupt_turn(tx, turn, "session_failed")
    if session.hold is not None:
        holds.release(tx, session.hold.id, how="failed")
    sessions.update(
        tx,
        session_id,
        status="failed",
        failure_reason=reason,
        closed_at=tx.now,
        hold_id=None,
        stop_reason="session_failed" if session.process_live else None,
    )


def reject_waiting_messages(tx: Tx, turn: TurnRow, *, reason: str) -> None:
    """Rejects the Turn's accepted messages whose handler never started."""
    for message in messages.with_status(tx, turn.id, "admitted"):
        messages.update(tx, message, status="rejected", reason=reason)
        record(
            tx,
            turn.session_id,
            EventKind.MESSAGE_REJECTED,
            {"messageId": message.id, "reason": reason},
            subject=message.id,
            turn_id=turn.id,
            epoch=turn.epoch,
        )
