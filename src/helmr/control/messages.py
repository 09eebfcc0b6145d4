"""Messages: ``send`` on the public side, handler readiness and outcomes on the runner side.

An accepted message keeps its exact target Turn; it is delivered to that
Turn's handler or rejected, never moved to another Turn.
"""

from __future__ import annotations

from pydantic import JsonValue

from helmr.control import guards
from helmr.control.lifecycle import settle_if_drained
from helmr.control.record import record
from helmr.control.turns import admit
from helmr.control.views import message_view, turn_view
from helmr.errors import Conflict, SessionHeld, TurnNotActive, TurnSettling
from helmr.events import EventKind
from helmr.protocol.api import MessageView, SendResult, TurnView
from helmr.states import MessageOutcome, MessageStatus, TurnSource
from helmr.store import ReadTx, Tx, messages, sessions, turns

# For each reportable outcome: the statuses it may follow, and the event it records.
# spec/002 has no kind of its own for "unknown" (the handler failed unexpectedly):
# it is recorded as message.rejected with reason HANDLER_FAILED and outcome
# "unknown", since the message was not handled successfully, while the message
# itself keeps status "unknown" (its effects may or may not have happened).
_OUTCOMES: dict[MessageOutcome, tuple[frozenset[MessageStatus], EventKind]] = {
    MessageOutcome.STARTED: (frozenset({"admitted"}), EventKind.MESSAGE_STARTED),
    MessageOutcome.DELIVERED: (frozenset({"admitted", "started"}), EventKind.MESSAGE_DELIVERED),
    MessageOutcome.REJECTED: (frozenset({"admitted", "started"}), EventKind.MESSAGE_REJECTED),
    MessageOutcome.UNKNOWN: (frozenset({"admitted", "started"}), EventKind.MESSAGE_REJECTED),
}

HANDLER_FAILED = "handler_failed"
"""The ``message.rejected`` reason of an unknown outcome: the handler raised
something other than ``MessageRejected``."""


def send(tx: Tx, session_id: str, data: JsonValue, turn_id: str | None = None) -> SendResult:
    """Messages the active Turn before settlement, or enqueues when the Session is idle.

    With ``turn_id`` the message goes to exactly that Turn, which must be the
    running one (else TurnNotActive). It is accepted even before the Turn's
    handler is ready. SessionNotOpen (ended, or closing when it would enqueue),
    SessionHeld, TurnSettling.
    """
    session = sessions.require(tx, session_id)
    guards.accepting_controls(session)
    if session.hold is not None:
        raise SessionHeld(
            f"session {session_id} is held ({session.hold.reason}); resume it first",
            hold_id=session.hold.id,
        )
    target_id = turn_id if turn_id is not None else session.active_turn_id
    if target_id is None:
        guards.admitting(tx, session)
        turn = admit(tx, session_id, data, idempotency_key=None, source=TurnSource.SEND)
        return SendResult(kind="enqueued", turn=turn_view(turn), message=None)
    target = turns.require(tx, session_id, target_id)
    if target.status != "running":
        raise TurnNotActive(f"turn {target.id} is {target.status}, not active", turn_id=target.id)
    guards.unsettled(target)
    message = messages.insert(tx, session_id, target.id, data)
    record(
        tx,
        session_id,
        EventKind.MESSAGE_ADMITTED,
        {"messageId": message.id},
        subject=message.id,
        turn_id=target.id,
    )
    return SendResult(kind="messaged", turn=turn_view(target), message=message_view(message))


def load_message(rt: ReadTx, session_id: str, turn_id: str, message_id: str) -> MessageView:
    """The exact message sent to that Turn (NotFound otherwise): its status, and the
    ``reason`` of a ``rejected`` or ``unknown`` outcome."""
    turns.require(rt, session_id, turn_id)
    return message_view(messages.require(rt, turn_id, message_id))


def ready(tx: Tx, session_id: str, epoch: int, turn_id: str) -> TurnView:
    """The runner registered the Turn's message handler."""
    session = guards.runner(tx, session_id, epoch)
    turn = guards.active(tx, session, turn_id)
    if turn.messages_ready_at is None:
        turn = turns.messages_ready(tx, turn)
    return turn_view(turn)


def next_waiting(rt: ReadTx, session_id: str, epoch: int, turn_id: str) -> MessageView | None:
    """The oldest message of the Turn not yet reported started (again until it is);
    TurnSettling while the Turn settles, TurnNotActive once it ended."""
    session = guards.runner(rt, session_id, epoch)
    guards.unsettled(guards.active(rt, session, turn_id))
    waiting = messages.with_status(rt, turn_id, "admitted")
    return message_view(waiting[0]) if waiting else None


def report(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str,
    message_id: str,
    outcome: MessageOutcome,
    reason: str | None = None,
) -> MessageView:
    """Records a handler's progress (``reason`` explains ``rejected`` and
    ``unknown``); repeating a report is a no-op. ``unknown`` keeps that status
    on the message (with the runner's ``reason``) and records
    ``message.rejected`` {messageId, reason ``handler_failed``, outcome
    ``unknown``, error: the runner's reason}.

    A finished handler may let a settling Turn commit its outcome.
    """
    session = guards.runner(tx, session_id, epoch)
    turn = guards.active(tx, session, turn_id)
    message = messages.require(tx, turn_id, message_id)
    if message.status == outcome:
        return message_view(message)
    follows, kind = _OUTCOMES[outcome]
    if message.status not in follows:
        error = TurnSettling if turn.settling is not None else Conflict
        raise error(
            f"message {message_id} is {message.status} and cannot become {outcome}",
            message_id=message_id,
        )
    message = messages.set_status(tx, message, outcome.value, reason)
    data: dict[str, JsonValue] = {"messageId": message_id}
    if outcome is MessageOutcome.UNKNOWN:
        data |= {"reason": HANDLER_FAILED, "outcome": outcome.value, "error": reason}
    elif reason is not None:
        data["reason"] = reason
    record(tx, session_id, kind, data, subject=message_id, turn_id=turn_id, epoch=epoch)
    if outcome is not MessageOutcome.STARTED:
        settle_if_drained(tx, session, turn)
    return message_view(message)
