"""Lifecycle facts written by the state machine, each with its deterministic id."""

from __future__ import annotations

from pydantic import JsonValue

from helmr.events import Event, EventKind, lifecycle_event_id
from helmr.store import Tx, timeline


def record(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    subject: str | int | None,
    turn_id: str | None = None,
    epoch: int | None = None,
) -> Event:
    """Appends the fact once: recording it again (a retried control) is a no-op."""
    return timeline.append(
        tx,
        session_id,
        kind,
        data,
        turn_id=turn_id,
        event_id=lifecycle_event_id(session_id, kind, subject),
        process_epoch=epoch,
    )
