"""History retention: payloads and old events go, Turn identity and status stay.

Events are removed as a prefix of the timeline (everything up to the newest
event older than the cutoff), so the retained history is always the range
``(retained_after, last sequence]`` and a cursor below ``retained_after``
knows it missed history. Event times follow sequence order because both
are taken by the single writer; a wall clock stepping back could only make
the removed prefix slightly longer, never leave a hole.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from helmr.store.codec import dump_time
from helmr.store.tx import ReadTx, Tx


@dataclass(frozen=True, slots=True)
class Expired:
    events: int = 0
    turns: int = 0

    def __add__(self, other: Expired) -> Expired:
        return Expired(self.events + other.events, self.turns + other.turns)


def sessions_to_expire(rt: ReadTx, cutoff: datetime) -> list[str]:
    """Sessions whose oldest retained event, or some ended Turn's payload, predates the cutoff."""
    at = dump_time(cutoff)
    rows = rt.conn.execute(
        "SELECT s.id FROM sessions s JOIN events e"
        " ON e.session_id = s.id AND e.sequence = s.retained_after + 1 WHERE e.created_at < ?"
        " UNION SELECT session_id FROM turns"
        " WHERE payload_expired = 0 AND ended_at IS NOT NULL AND ended_at < ?",
        (at, at),
    ).fetchall()
    return [row[0] for row in rows]


def expire_session(tx: Tx, session_id: str, cutoff: datetime) -> Expired:
    at = dump_time(cutoff)
    (boundary,) = tx.conn.execute(
        "SELECT max(sequence) FROM events WHERE session_id = ? AND created_at < ?",
        (session_id, at),
    ).fetchone()
    events = 0
    if boundary is not None:
        events = tx.conn.execute(
            "DELETE FROM events WHERE session_id = ? AND sequence <= ?", (session_id, boundary)
        ).rowcount
        tx.conn.execute(
            "DELETE FROM output_keys WHERE session_id = ? AND sequence <= ?",
            (session_id, boundary),
        )
        tx.conn.execute(
            "UPDATE sessions SET retained_after = ? WHERE id = ?", (boundary, session_id)
        )
    # Only ended Turns lose their payload: a queued Turn's input is still to be run.
    ended = "session_id = ? AND payload_expired = 0 AND ended_at IS NOT NULL AND ended_at < ?"
    tx.conn.execute(
        "UPDATE messages SET data = NULL, payload_expired = 1"
        f" WHERE turn_id IN (SELECT id FROM turns WHERE {ended})",
        (session_id, at),
    )
    turns = tx.conn.execute(
        "UPDATE turns SET input = NULL, result = NULL, response = NULL, payload_expired = 1"
        f" WHERE {ended}",
        (session_id, at),
    ).rowcount
    return Expired(events=events, turns=turns)
