"""Session rows: creation, lookup and the queries the operator side polls."""

from __future__ import annotations

from datetime import datetime, timedelta

from helmr.errors import NotFound
from helmr.store import holds
from helmr.store.codec import db_value, dump_time, load_time, new_id
from helmr.store.rows import SessionRow
from helmr.store.tx import ReadTx, Tx


def insert(
    tx: Tx,
    *,
    namespace: str,
    name: str,
    actor: str,
    workspace: str,
    key: str | None,
    idempotency_key: str | None,
    max_turn_duration: timedelta | None,
) -> SessionRow:
    session_id = new_id("ses")
    tx.conn.execute(
        "INSERT INTO sessions (id, namespace, name, actor, workspace, key, idempotency_key,"
        " status, max_turn_duration_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?)",
        (
            session_id,
            namespace,
            name,
            actor,
            workspace,
            key,
            idempotency_key,
            db_value(max_turn_duration),
            dump_time(tx.now),
        ),
    )
    return require(tx, session_id)


def get(rt: ReadTx, session_id: str) -> SessionRow | None:
    row = rt.conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    hold = holds.get(rt, row["hold_id"]) if row["hold_id"] is not None else None
    return SessionRow.load(row, hold)


def require(rt: ReadTx, session_id: str) -> SessionRow:
    session = get(rt, session_id)
    if session is None:
        raise NotFound(f"no session {session_id}", session_id=session_id)
    return session


def by_idempotency_key(rt: ReadTx, namespace: str, idempotency_key: str) -> SessionRow | None:
    return _one(
        rt,
        "SELECT id FROM sessions WHERE namespace = ? AND idempotency_key = ?",
        (namespace, idempotency_key),
    )


def workspace_owner(rt: ReadTx, namespace: str, workspace: str) -> SessionRow | None:
    """The Session that holds the Workspace now (not ended, or its process not gone)."""
    return _one(
        rt,
        "SELECT id FROM sessions WHERE namespace = ? AND workspace = ?"
        " AND (status IN ('open', 'closing') OR process_live = 1)",
        (namespace, workspace),
    )


def update(tx: Tx, session_id: str, **changes: object) -> None:
    tx.update("sessions", session_id, changes)
    tx.touch(session_id)


def needing_runner(rt: ReadTx) -> list[SessionRow]:
    """Open or closing, not held, no live process, and queued work."""
    return _many(
        rt,
        "SELECT s.id FROM sessions s WHERE s.status IN ('open', 'closing')"
        " AND s.hold_id IS NULL AND s.process_live = 0"
        " AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status = 'queued')"
        " ORDER BY s.created_at",
    )


def live(rt: ReadTx) -> list[SessionRow]:
    """Sessions with a live runner process."""
    return _many(rt, "SELECT id FROM sessions WHERE process_live = 1 ORDER BY created_at")


def stopping(rt: ReadTx) -> list[SessionRow]:
    """Sessions whose live process has been asked to stop."""
    return _many(
        rt,
        "SELECT id FROM sessions WHERE process_live = 1 AND stop_reason IS NOT NULL"
        " ORDER BY created_at",
    )


_AWAITING_RELEASE = (
    "FROM sessions WHERE stop_deadline_at IS NOT NULL AND process_live = 1 AND stop_reason IS NULL"
)
"""Live processes given until ``stop_deadline_at`` to let go of an interrupted Turn,
and not asked to stop for another reason."""


def past_stop_deadline(rt: ReadTx, now: datetime) -> list[SessionRow]:
    """Sessions whose live process has not let go of an interrupted Turn in time."""
    return [
        require(rt, row["id"])
        for row in rt.conn.execute(
            f"SELECT id {_AWAITING_RELEASE} AND stop_deadline_at <= ? ORDER BY stop_deadline_at",
            (dump_time(now),),
        ).fetchall()
    ]


def next_stop_deadline(rt: ReadTx) -> datetime | None:
    (deadline,) = rt.conn.execute(f"SELECT min(stop_deadline_at) {_AWAITING_RELEASE}").fetchone()
    return load_time(deadline)


def _one(rt: ReadTx, sql: str, args: tuple[object, ...]) -> SessionRow | None:
    row = rt.conn.execute(sql, args).fetchone()
    return None if row is None else require(rt, row["id"])


def _many(rt: ReadTx, sql: str) -> list[SessionRow]:
    return [require(rt, row["id"]) for row in rt.conn.execute(sql).fetchall()]
