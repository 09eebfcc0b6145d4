"""Transitions several controls share: ending Turns, settling, closing, failing.

Every function runs inside the caller's write transaction, so a state change
and the events that record it commit together.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import JsonValue

from helmr.control import disks
from helmr.control.record import record, record_changing_session
from helmr.control.stops import StopRequest, stop_request
from helmr.events import TURN_ENDED, EventKind
from helmr.states import InterruptReason, StopReason, TerminalTurnStatus
from helmr.store import (
    MessageRow,
    ReadTx,
    SessionRow,
    TurnRow,
    Tx,
    holds,
    messages,
    sessions,
    timeline,
    turns,
)


def active_turn(rt: ReadTx, session: SessionRow) -> TurnRow | None:
    if session.active_turn_id is None:
        return None
    return turns.require(rt, session.id, session.active_turn_id)


def end_turn(
    tx: Tx,
    turn: TurnRow,
    status: Literal["failed", "interrupted", "cancelled"],
    data: dict[str, JsonValue],
    *,
    reason: str | None = None,
) -> tuple[TurnRow, SessionRow]:
    """Moves a queued or running Turn to a terminal status other than ``completed``
    (:func:`complete_turn`), once, and records it. Answers the Turn and the Session,
    as the Turn's end left them."""
    return _ended(tx, turn, status, data, reason, sessions.turn_ending(turn.id, completed=False))


def complete_turn(
    tx: Tx, session: SessionRow, turn: TurnRow, data: dict[str, JsonValue]
) -> tuple[TurnRow, SessionRow]:
    """:func:`end_turn` as ``completed``, with the save of ``session``'s Workspace
    that a completed Turn requests. Answers the Turn and the Session, as the Turn's
    end left them."""
    # In the transaction that commits the outcome: a crash cannot lose the request.
    # Requested before the Session's row is updated, so that one update also makes
    # the next Turn wait for this save's cut, when it is to.
    awaiting_cut = disks.request_save(tx, session, turn)
    change = sessions.turn_ending(turn.id, completed=True, awaiting_cut=awaiting_cut)
    return _ended(tx, turn, "completed", data, None, change)


def _ended(
    tx: Tx,
    turn: TurnRow,
    status: TerminalTurnStatus,
    data: dict[str, JsonValue],
    reason: str | None,
    session_change: timeline.SessionChange,
) -> tuple[TurnRow, SessionRow]:
    """The Turn's row and event at its terminal ``status``; the Session's row changed
    (``session_change``) in the statement that takes the event's sequence."""
    if turn.settling is None:
        # A settling Turn's waiting messages were rejected as it began settling,
        # and it admits none since (TurnSettling): nothing to look for.
        reject_waiting_messages(tx, turn, reason=f"turn_{status}")
    turn = turns.ended(tx, turn, status, reason)
    session = record_changing_session(
        tx,
        turn.session_id,
        TURN_ENDED[status],
        data,
        subject=turn.id,
        turn_id=turn.id,
        epoch=turn.epoch,
        session_change=session_change,
    )
    return turn, session


def interrupt_turn(tx: Tx, turn: TurnRow, reason: str, **details: JsonValue) -> TurnRow:
    return end_turn(tx, turn, "interrupted", {"reason": reason, **details}, reason=reason)[0]


def request_stop(tx: Tx, turn: TurnRow, grace: timedelta) -> None:
    """Gives the live process ``grace`` to let go of ``turn``, whose stop was just accepted.

    The Turn keeps ``running`` until then; its ``maxTurnDuration`` no longer
    applies (the grace does). Letting go is the process's next ``receive`` or its
    end (:func:`converge_stop`). Past the grace, ``expire_deadlines`` asks for the
    process to stop (``stop_deadline_elapsed``), and its end counts as a process
    failure. A stop asked for meanwhile (cancel, close) supersedes the deadline;
    an earlier deadline stands.
    """
    turns.no_deadline(tx, turn)
    session = sessions.require(tx, turn.session_id)
    if (
        session.process_live
        and session.process_epoch == turn.epoch
        and session.stop_deadline_at is None
    ):
        sessions.stop_deadline(tx, session.id, tx.now + grace)


def converge_stop(tx: Tx, session: SessionRow) -> TurnRow | None:
    """The process has let go of its active Turn: a pending stop (:func:`stop_request`)
    becomes that Turn's ``interrupted`` outcome now, exactly once. Returns the Turn
    it ended, if any; the stop grace deadline is cleared either way."""
    if session.stop_deadline_at is not None:
        sessions.stop_deadline(tx, session.id, None)
    turn = active_turn(tx, session)
    stop = None if turn is None else stop_request(session, turn)
    if turn is None or stop is None:
        return None
    return interrupt_turn(tx, turn, stop.reason, **stop.details)


def cancel_queued(tx: Tx, session_id: str, *, reason: str | None) -> None:
    data: dict[str, JsonValue] = {} if reason is None else {"reason": reason}
    for turn in turns.queued(tx, session_id):
        end_turn(tx, turn, "cancelled", data, reason=reason)


def settle_if_drained(
    tx: Tx, session: SessionRow, turn: TurnRow, *, handling: bool | None = None
) -> tuple[TurnRow, SessionRow | None]:
    """Commits a settling Turn's outcome once no started message handler is pending
    (``handling``: whether one is, when the caller read it already). ``session``: the
    Turn's Session as this transaction read it (its Workspace, for a completed Turn's
    save). Answers the Turn, and the Session as the outcome left it (None if the Turn
    is still settling).

    Settlement waits for callbacks already running (``started``); messages
    whose handler never started were rejected when settlement began.
    """
    if handling is None:
        handling = turn.settling is not None and bool(messages.with_status(tx, turn.id, "started"))
    if turn.settling is None or handling:
        return turn, None
    if turn.settling == "completed":
        data: dict[str, JsonValue] = {
            "hasResult": turn.has_result,
            "hasResponse": turn.has_response,
        }
        turn, ended = complete_turn(tx, session, turn, data)
    else:
        turn, ended = end_turn(tx, turn, "failed", {"error": turn.error})
    return turn, finish_closing(tx, turn.session_id, ended)


def finish_closing(tx: Tx, session_id: str, session: SessionRow | None = None) -> SessionRow | None:
    """Closes a closing Session once its work has drained and its process is gone.

    While the process is still live it is asked to stop first: a Session is
    ``closed`` only after its execution is excluded, so its Workspace is free.
    An active Turn whose stop was accepted counts as drained: its process is
    asked to stop now, and that Turn converges when the process has ended.
    ``session``: the Session as this transaction has it now, if the caller has it
    (a read fewer). Answers the Session if nothing changed it here (None otherwise).
    """
    session = session or sessions.require(tx, session_id)
    if session.status != "closing":
        return session
    turn = active_turn(tx, session)
    if (turn is not None and stop_request(session, turn) is None) or turns.count_queued(
        tx, session_id
    ):
        return session
    if session.process_live:
        if session.stop_reason is None and session.close_how is not None:
            sessions.ask_stop(tx, session_id, session.close_how)
        return None
    if session.hold is not None:
        holds.release(tx, session.hold.id, how="closed")
    sessions.closed(tx, session_id)
    record(tx, session_id, EventKind.SESSION_CLOSED, {"how": session.close_how}, subject=None)
    return None


def fail_session(tx: Tx, session_id: str, reason: str) -> None:
    """Terminates the Session: nothing more runs in it.

    Queued Turns are cancelled (reason ``session_failed``) rather than left
    queued forever; a running Turn is interrupted. A live process is asked
    to stop; the Workspace stays owned until it is gone.
    """
    session = sessions.require(tx, session_id)
    cancel_queued(tx, session_id, reason=InterruptReason.SESSION_FAILED)
    turn = active_turn(tx, session)
    if turn is not None:
        # Ended now, before its process is gone: the Session is over, and the stop
        # asked for below fences every later call. A stop already accepted keeps its reason.
        stop = stop_request(session, turn) or StopRequest(InterruptReason.SESSION_FAILED, {})
        interrupt_turn(tx, turn, stop.reason, **stop.details)
    if session.hold is not None:
        holds.release(tx, session.hold.id, how="failed")
    sessions.failed(
        tx, session_id, reason, StopReason.SESSION_FAILED if session.process_live else None
    )


def reject_waiting_messages(
    tx: Tx, turn: TurnRow, *, reason: str, waiting: list[MessageRow] | None = None
) -> None:
    """Rejects the Turn's accepted messages whose handler never started (``waiting``,
    when the caller read them already)."""
    if waiting is None:
        waiting = messages.with_status(tx, turn.id, "admitted")
    for message in waiting:
        messages.set_status(tx, message, "rejected", reason)
        record(
            tx,
            turn.session_id,
            EventKind.MESSAGE_REJECTED,
            {"messageId": message.id, "reason": reason},
            subject=message.id,
            turn_id=turn.id,
            epoch=turn.epoch,
        )
