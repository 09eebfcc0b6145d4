"""Transaction handles passed to store functions.

A :class:`ReadTx` is a consistent snapshot. A :class:`Tx` is a write
transaction: everything a function does through it commits atomically or not
at all. Both read ``now`` from the store's clock when the function starts. On SQLite that is a
part of the single writer's transaction, so timestamps follow commit order;
on PostgreSQL writes run concurrently, and what a function reads of a Session
it reads under that Session's row lock (:meth:`Tx.lock`, :meth:`Tx.locking`), so
writes to one Session are serialized across every replica.

``conn`` is either backend's connection: ``conn.execute(sql, args)`` with
SQLite's ``?`` placeholders, returning a cursor whose rows are read by
column name or position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol

from helmr.store.codec import DbValue, db_value
from helmr.store.dialect import Dialect


class DbCursor(Protocol):
    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class DbConnection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> DbCursor: ...


class ReadTx:
    def __init__(self, conn: DbConnection, dialect: Dialect, now: datetime) -> None:
        self.conn = conn
        self.dialect = dialect
        self.now = now

    def locking(self, session_id: str) -> str:
        """Appended to the ``SELECT`` of the Session's row: in a write transaction,
        the row stays locked until commit (see :meth:`Tx.lock`)."""
        return ""

    @property
    def locks_rows(self) -> bool:
        """Whether a Session's row read here is locked first: then a row another
        statement listed is read again, under its lock, as it is now."""
        return False


class Tx(ReadTx):
    def __init__(self, conn: DbConnection, dialect: Dialect, now: datetime) -> None:
        super().__init__(conn, dialect, now)
        self.touched: set[str] = set()
        self.queues: dict[str, bool] = {}
        """Per Session whose Turn this transaction queued (True) or started (False),
        the last: whether it left one to start (see :meth:`Signals.turn_queued`)."""
        self._locked: set[str] = set()

    @property
    def locks_rows(self) -> bool:
        return self.dialect.row_lock != ""

    def locking(self, session_id: str) -> str:
        if not self.locks_rows:
            return ""
        self._locked.add(session_id)
        return self.dialect.row_lock

    def touch(self, session_id: str) -> None:
        """Wakes the Session's waiters once this transaction commits."""
        self.touched.add(session_id)

    def queue_changed(self, session_id: str, *, queued: bool) -> None:
        """A Turn of the Session was queued (``queued``) or started here: once this
        transaction commits, this replica's next ``receive`` for the Session knows
        whether a Turn is likely waiting for it (:meth:`Signals.turn_queued`)."""
        self.queues[session_id] = queued

    def lock(self, session_id: str) -> None:
        """Holds the Session's row until commit, so no other replica's write to the
        Session interleaves with this one (a no-op where writes are serial)."""
        if self.locks_rows and session_id not in self._locked:
            self.conn.execute(
                f"SELECT 1 FROM sessions WHERE id = ?{self.locking(session_id)}", (session_id,)
            )

    def update(self, table: str, row_id: str, changes: dict[str, object]) -> None:
        """``UPDATE table SET ... WHERE id = row_id``; column names come from code only."""
        if changes:
            self._update(table, row_id, changes, "")

    def updated(self, table: str, row_id: str, changes: dict[str, object]) -> Any:
        """:meth:`update`, answering the row as it is then (None if there is none):
        one statement, where an update and a read of the row would be two."""
        if not changes:
            return self.conn.execute(f"SELECT * FROM {table} WHERE id = ?", (row_id,)).fetchone()
        return self._update(table, row_id, changes, " RETURNING *").fetchone()

    def _update(
        self, table: str, row_id: str, changes: dict[str, object], returning: str
    ) -> DbCursor:
        columns = ", ".join(f"{name} = ?" for name in changes)
        values: Iterable[DbValue] = (db_value(value) for value in changes.values())
        return self.conn.execute(
            f"UPDATE {table} SET {columns} WHERE id = ?{returning}", (*values, row_id)
        )
