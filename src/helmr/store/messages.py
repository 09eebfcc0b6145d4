"""Message rows: exact-Turn messages in admission order, and their delivery status."""

from __future__ import annotations

from pydantic import JsonValue

from helmr.errors import NotFound
from helmr.states import MessageStatus
from helmr.store.codec import dump_json, dump_time, new_id
from helmr.store.rows import MessageRow
from helmr.store.tx import ReadTx, Tx


def insert(tx: Tx, session_id: str, turn_id: str, data: JsonValue) -> MessageRow:
    encoded = dump_json(data)
    message_id = new_id("msg")
    tx.conn.execute(
        "INSERT INTO messages (id, session_id, turn_id, ord, data, status, created_at)"
        " SELECT ?, ?, ?, coalesce(max(ord), 0) + 1, ?, 'admitted', ?"
        " FROM messages WHERE turn_id = ?",
        (message_id, session_id, turn_id, encoded, dump_time(tx.now), turn_id),
    )
    tx.touch(session_id)
    return _require(tx, message_id)


def require(rt: ReadTx, turn_id: str, message_id: str) -> MessageRow:
    """The message, which must have been sent to that Turn."""
    row = rt.conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None or row["turn_id"] != turn_id:
        raise NotFound(f"no message {message_id} for turn {turn_id}", message_id=message_id)
    return MessageRow.load(row)


def with_status(rt: ReadTx, turn_id: str, status: MessageStatus) -> list[MessageRow]:
    """The Turn's messages in that status, in admission order."""
    rows = rt.conn.execute(
        "SELECT * FROM messages WHERE turn_id = ? AND status = ? ORDER BY ord",
        (turn_id, status),
    ).fetchall()
    return [MessageRow.load(row) for row in rows]


_PENDING = "FROM messages WHERE turn_id = ? AND status IN ('admitted', 'started')"
"""The Turn's messages not yet handled; one parameter: its id."""
COUNT_PENDING = f"SELECT count(*) {_PENDING}"
"""How many of a Turn's messages are not yet handled (also a column of a Turn read)."""


def pending(rt: ReadTx, turn_id: str) -> list[MessageRow]:
    """The Turn's messages ``admitted`` or ``started`` (not yet handled), in admission
    order: what settling a Turn looks at, in one statement."""
    rows = rt.conn.execute(f"SELECT * {_PENDING} ORDER BY ord", (turn_id,)).fetchall()
    return [MessageRow.load(row) for row in rows]


def set_status(
    tx: Tx, message: MessageRow, status: MessageStatus, reason: str | None
) -> MessageRow:
    """``message`` moved to ``status`` (``reason``: why it was rejected, or failed)."""
    tx.update("messages", message.id, {"status": status, "reason": reason})
    tx.touch(message.session_id)
    return _require(tx, message.id)


def _require(rt: ReadTx, message_id: str) -> MessageRow:
    row = rt.conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    assert row is not None
    return MessageRow.load(row)
