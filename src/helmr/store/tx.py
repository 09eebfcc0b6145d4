"""Transaction handles passed to store functions.

A :class:`ReadTx` is a consistent snapshot on a reader connection. A
:class:`Tx` is a part of the single writer's transaction: everything a
function does through it commits atomically or not at all, and ``now`` is
read by the writer thread when the function starts, so timestamps follow
commit order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime

from helmr.store.codec import DbValue, db_value


class ReadTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class Tx(ReadTx):
    def __init__(self, conn: sqlite3.Connection, now: datetime) -> None:
        super().__init__(conn)
        self.now = now
        self.touched: set[str] = set()

    def touch(self, session_id: str) -> None:
        """Wakes the Session's waiters once this transaction commits."""
        self.touched.add(session_id)

    def update(self, table: str, row_id: str, changes: dict[str, object]) -> None:
        """``UPDATE table SET ... WHERE id = row_id``; column names come from code only."""
        if not changes:
            return
        columns = ", ".join(f"{name} = ?" for name in changes)
        values: Iterable[DbValue] = (db_value(value) for value in changes.values())
        self.conn.execute(f"UPDATE {table} SET {columns} WHERE id = ?", (*values, row_id))
