"""Plain connections to a test's store, either backend, for what the Store does
not do: rewind a schema to an older version, or read the version back."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from helmr.store.dialect import POSTGRES, SQLITE, Dialect
from helmr.store.store import is_postgres


class Plain:
    def __init__(self, conn: sqlite3.Connection | psycopg.Connection[Any], dialect: Dialect):
        self._conn = conn
        self._dialect = dialect

    def execute(self, sql: str) -> list[Any]:
        """The statement's rows (none for a statement that returns none)."""
        cursor = self._conn.execute(self._dialect.statement(sql), ())
        return cursor.fetchall() if cursor.description else []

    @property
    def version(self) -> int:
        if self._dialect is SQLITE:
            return int(self.execute("PRAGMA user_version")[0][0])
        return int(self.execute("SELECT version FROM schema_version")[0][0])

    @version.setter
    def version(self, version: int) -> None:
        if self._dialect is SQLITE:
            self._conn.execute(f"PRAGMA user_version = {version}")
        else:
            self._conn.execute("UPDATE schema_version SET version = %s", (version,))


@contextmanager
def plain(location: str | Path) -> Iterator[Plain]:
    """An autocommit connection to the store at ``location``."""
    if is_postgres(location):
        with psycopg.connect(str(location), autocommit=True) as conn:
            yield Plain(conn, POSTGRES)
        return
    sqlite = sqlite3.connect(location, isolation_level=None)
    try:
        yield Plain(sqlite, SQLITE)
    finally:
        sqlite.close()
