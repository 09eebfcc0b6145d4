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
) -> Event:
    """Appends the fact once: recording it again (a retried control) is a no-op.
    ``session_change``: set on the Session's row with it (``timeline.append``)."""
    return timeline.append(
        tx,
        session_id,
        kind,
        data,
        turn_id=turn_id,
        event_id=lifecycle_event_id(session_id, kind, subject),
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
    _, row = timeline.append_answering_session(
        tx,
        session_id,
        kind,
        data,
        turn_id=turn_id,
        event_id=lifecycle_event_id(session_id, kind, subject),
        process_epoch=epoch,
        session_change=session_change,
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
    return record(tx, session_id, kind, data, subject=subject, turn_id=turn_id, epoch=process_epoch)
