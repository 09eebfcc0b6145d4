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

    def schema(self) -> dict[str, object]:
        """What the schema is, whatever order it was made in: each table's columns
        (name, type, null allowed, default), its CHECK constraints, and the indexes."""
        if self._dialect is SQLITE:
            tables = [
                r[0] for r in self.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            described: dict[str, object] = {
                table: (
                    {tuple(c[1:6]) for c in self.execute(f"PRAGMA table_info({table})")},
                    _checks(self._table_sql(table)),
                )
                for table in tables
            }
            indexes = self.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            )
        else:
            columns = self.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default"
                " FROM information_schema.columns WHERE table_schema = current_schema()"
            )
            checks = self.execute(
                "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE contype = 'c' AND connamespace = current_schema()::regnamespace"
            )
            described = {
                table: (
                    {tuple(c[1:]) for c in columns if c[0] == table},
                    {check for name, check in checks if name == table},
                )
                for table in {c[0] for c in columns}
            }
            indexes = self.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            )
        # By what each index is, not its name (a table copied and renamed keeps its
        # primary key's name in PostgreSQL).
        described["indexes"] = {
            " ".join(sql.replace(f" {name} ", " ").split()) for name, sql in indexes
        }
        return described

    def _table_sql(self, table: str) -> str:
        sql = self.execute(f"SELECT sql FROM sqlite_master WHERE name = '{table}'")[0][0]
        return " ".join(str(sql).replace('"', "").split())

    def drop_version_12(self) -> None:
        """Drops what version 12 added (an ending process's fence against starts)."""
        self.execute("ALTER TABLE sessions DROP COLUMN starts_fenced_epoch")

    def drop_version_11(self) -> None:
        """Undoes version 11 (the save policy's last cut was its last save taken), and
        what later ones did."""
        self.drop_version_12()
        self.execute("ALTER TABLE workspaces RENAME COLUMN last_cut_at TO last_taken_at")

    def drop_version_10(self) -> None:
        """Drops what version 10 added (warm pools' adoptions), and undoes later ones."""
        self.drop_version_11()
        self.execute("DROP TABLE adoptions")
        self.execute("ALTER TABLE workspaces DROP COLUMN first_claim")

    def drop_version_9(self, *, saves: bool = True) -> None:
        """Drops the columns version 9 added (turn-aligned saves), and what later ones
        did, making the database one of an older version as far as they go; ``saves``:
        those of ``saves`` too."""
        self.drop_version_10()
        columns = [
            ("workspaces", "taking"),
            ("workspaces", "aligned"),
            ("workspaces", "save_interval_s"),
            ("workspaces", "last_taken_at"),
            ("workspaces", "fork_snapshot"),
            ("workspaces", "fork_session"),
            ("workspaces", "fork_workspace"),
            ("workspaces", "fork_turn"),
            ("sessions", "awaiting_cut"),
        ]
        if saves:
            columns += [("saves", "taken_at"), ("saves", "cut_at")]
        for table, column in columns:
            self.execute(f"ALTER TABLE {table} DROP COLUMN {column}")

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


def _checks(sql: str) -> set[str]:
    """The CHECK constraints in a table's SQL, each as written between its parentheses."""
    found = set()
    start = sql.find("CHECK (")
    while start != -1:
        depth, at = 0, start + len("CHECK ")
        for end in range(at, len(sql)):
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            if depth == 0:
                found.add(sql[at + 1 : end])
                break
        start = sql.find("CHECK (", start + 1)
    return found
