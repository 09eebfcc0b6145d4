"""What the status mirror reads of a pass, a whole batch of Sessions per transaction.

Each read transaction is a hop to a store thread and back (on PostgreSQL, round
trips for its ``BEGIN`` and ``COMMIT`` too): one per Session, per page and per
Turn made the status mirror's reads the largest part of a no-op Turn's cost
that is Helmr's own (docs/sizing.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from helmr.control.views import load_session, turn_view
from helmr.errors import NotFound
from helmr.events import EventPage
from helmr.protocol.api import SessionView, TurnView
from helmr.store import ReadTx, timeline, turns


@dataclass(frozen=True, slots=True)
class SessionRead:
    session: SessionView
    events: EventPage
    """The first page of its events after the cursor it was read with."""


def sessions_after(rt: ReadTx, cursors: Mapping[str, int], limit: int) -> dict[str, SessionRead]:
    """Each Session of ``cursors`` (id -> the sequence followed through) with up to
    ``limit`` of its events after that; a Session not in the store is left out."""
    read = {}
    for session_id, after in cursors.items():
        try:
            session = load_session(rt, session_id)
        except NotFound:
            continue
        read[session_id] = SessionRead(session, timeline.page(rt, session_id, after, limit))
    return read


def turns_of(rt: ReadTx, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], TurnView]:
    """Each (Session id, Turn id) of ``wanted`` that is in the store, and its Turn."""
    found = {}
    for session_id, turn_id in wanted:
        row = turns.get(rt, turn_id)
        if row is not None and row.session_id == session_id:
            found[session_id, turn_id] = turn_view(row)
    return found
