"""How far the status mirror has followed each Session's timeline.

The status mirror (helmr.operator.mirror.status_sync) saves, after a pass, the last
event sequence whose facts it has written to the Session's resources; after a
restart it goes on from there rather than rereading every timeline from its
first event (work that grew with the whole history, not with what changed).
Saving never touches a Session: the change feed does not hear of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from helmr.store.tx import ReadTx, Tx


def load(rt: ReadTx, session_ids: Iterable[str]) -> dict[str, int]:
    """Each Session's saved cursor (0: its timeline was never followed); unknown
    ids are left out."""
    cursors: dict[str, int] = {}
    for session_id in session_ids:
        row = rt.conn.execute(
            "SELECT mirrored_event_seq FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is not None:
            cursors[session_id] = int(row[0])
    return cursors


def behind(rt: ReadTx) -> list[str]:
    """Sessions whose timeline has events past their saved cursor: the mirror's
    backlog, for when changes may have gone unannounced (a replica's change feed
    lost its connection to the server)."""
    rows = rt.conn.execute(
        "SELECT id FROM sessions WHERE last_event_seq > mirrored_event_seq"
    ).fetchall()
    return [str(row[0]) for row in rows]


def save(tx: Tx, cursors: Mapping[str, int]) -> None:
    """Saves each Session's cursor; a cursor never moves back (a slower pass's).
    Rows are updated in id order: two such saves never wait on each other in a cycle."""
    for session_id, after in sorted(cursors.items()):
        tx.conn.execute(
            "UPDATE sessions SET mirrored_event_seq = ? WHERE id = ? AND mirrored_event_seq < ?",
            (after, session_id, after),
        )
