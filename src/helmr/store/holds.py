"""Hold rows: why a Session is held, and whether that hold was released.

Released holds stay, so that repeating a ``resume`` of the same hold is
recognised rather than reported as a mismatch.
"""

from __future__ import annotations

from helmr.states import HoldReason, HoldScope
from helmr.store.codec import dump_time, new_id
from helmr.store.rows import HoldRow
from helmr.store.tx import ReadTx, Tx


def insert(
    tx: Tx, session_id: str, *, reason: HoldReason, scope: HoldScope, turn_id: str | None
) -> HoldRow:
    hold_id = new_id("hold")
    tx.conn.execute(
        "INSERT INTO holds (id, session_id, reason, scope, turn_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (hold_id, session_id, reason, scope, turn_id, dump_time(tx.now)),
    )
    hold = get(tx, hold_id)
    assert hold is not None
    return hold


def get(rt: ReadTx, hold_id: str) -> HoldRow | None:
    row = rt.conn.execute("SELECT * FROM holds WHERE id = ?", (hold_id,)).fetchone()
    return None if row is None else HoldRow.load(row)


def set_reason(tx: Tx, hold_id: str, reason: HoldReason) -> None:
    """What an open hold now stands for (its resume acknowledges that too)."""
    tx.update("holds", hold_id, {"reason": reason})


def release(tx: Tx, hold_id: str, *, how: str) -> None:
    tx.update("holds", hold_id, {"released_at": tx.now, "released_how": how})
