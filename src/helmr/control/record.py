"""Lifecycle facts written by the state machine, each with its deterministic id."""

from __future__ import annotations

from pydantic import JsonValue

from helmr.errors import InvalidInput
from helmr.events import Event, EventKind, lifecycle_event_id
from helmr.store import SessionRow, Tx, sessions, timeline

REPORTED_KINDS = frozenset(
    {
        EventKind.SESSION_RECOVERY_GAP,
        EventKind.SLACK_DELIVERY_UNAVAILABLE,
    }
)
"""Facts the operator observes and reports (:func:`reported`); every other kind
is recorded by the state machine itself."""


def record(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    subject: str | int | None,
    turn_id: str | None = None,
    epoch: int | None = None,
    session_change: timeline.SessionChange | None = None,
) -> None:
    """Appends the fact once: recording it again (a retried control) is a no-op.
    ``session_change``: set on the Session's row with it (``timeline.append``). No
    caller reads the event: it is not built (``timeline.append_unanswered``)."""
    event_id = lifecycle_event_id(session_id, kind, subject)
    timeline.append_unanswered(
        tx,
        session_id,
        kind,
        data,
        turn_id=turn_id,
        event_id=event_id,
        process_epoch=epoch,
        session_change=session_change,
    )


def record_changing_session(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    subject: str | int | None,
    turn_id: str | None,
    epoch: int | None,
    session_change: timeline.SessionChange,
) -> SessionRow:
    """:func:`record` with ``session_change`` set on the Session's row in the same
    statement; answers the Session as it left it (no read of it after)."""
    event_id = lifecycle_event_id(session_id, kind, subject)
    row = timeline.append_unanswered(
        tx,
        session_id,
        kind,
        data,
        turn_id=turn_id,
        event_id=event_id,
        process_epoch=epoch,
        session_change=session_change,
        answering_session=True,
    )
    return sessions.loaded(tx, row)


def reported(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    subject: str | int,
    turn_id: str | None = None,
    process_epoch: int | None = None,
) -> Event:
    """Records a fact the operator observed (one of :data:`REPORTED_KINDS`), once per
    ``subject``; InvalidInput for a kind the state machine records itself."""
    if kind not in REPORTED_KINDS:
        raise InvalidInput(f"{kind} is recorded by the state machine, not reported")
    event_id = lifecycle_event_id(session_id, kind, subject)
    return timeline.append(
        tx, session_id, kind, data, turn_id=turn_id, event_id=event_id, process_epoch=process_epoch
    )
