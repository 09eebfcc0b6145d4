"""Computer disk pressure rows: a Session's thresholds and its open episode.

One row per Session that has had a runner with a disk: the operator writes
the thresholds before each runner starts, and Control moves the episode
(:mod:`helmr.control.storage_pressure`).
"""

from __future__ import annotations

from helmr.states import EpisodeState
from helmr.store.rows import StorageLimits, StorageRow
from helmr.store.tx import ReadTx, Tx


def set_limits(tx: Tx, session_id: str, limits: StorageLimits) -> None:
    """Stores the thresholds (a new runner's disk may differ); an open episode stays."""
    tx.conn.execute(
        "INSERT INTO storage (session_id, capacity_bytes, pause_at, stop_at, resolve_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " capacity_bytes = excluded.capacity_bytes, pause_at = excluded.pause_at,"
        " stop_at = excluded.stop_at, resolve_at = excluded.resolve_at",
        (
            session_id,
            limits.capacity_bytes,
            limits.pause_at,
            limits.stop_at,
            limits.resolve_at,
        ),
    )


def get(rt: ReadTx, session_id: str) -> StorageRow | None:
    row = rt.conn.execute("SELECT * FROM storage WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else StorageRow.load(row)


def set_episode(
    tx: Tx, session_id: str, *, episode: int, state: EpisodeState | None, hold_id: str | None
) -> None:
    tx.conn.execute(
        "UPDATE storage SET episode = ?, state = ?, hold_id = ? WHERE session_id = ?",
        (episode, state, hold_id, session_id),
    )


def count_under_pressure(rt: ReadTx) -> int:
    """Sessions not ended whose disk is in an episode (paused or stopped)."""
    row = rt.conn.execute(
        "SELECT COUNT(*) FROM storage JOIN sessions ON sessions.id = storage.session_id"
        " WHERE storage.state IS NOT NULL AND sessions.status IN ('open', 'closing')"
    ).fetchone()
    return int(row[0])
