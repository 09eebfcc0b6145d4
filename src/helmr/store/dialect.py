"""The few SQL differences between the store's two backends, SQLite and PostgreSQL.

The transaction functions are one set of code for both: they write SQLite's
spelling (``?`` placeholders, its JSON functions, its column types in the
DDL), and a :class:`Dialect` says what differs. PostgreSQL's statement text
is derived once per distinct text and cached, so the hot path pays a dict
lookup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    row_lock: str
    """Appended to a ``SELECT`` of a write transaction to lock the rows it reads
    until commit: empty where the single writer serializes every write."""
    json_object: str
    json_parse: str
    """``json_parse.format(column)``: a column of JSON text as a JSON value."""
    json_array_agg: str
    """``json_array_agg.format(value)``: the rows' values as one JSON array, as text
    (``[]`` for no row)."""
    updates_in_with: bool
    """Whether a ``WITH`` may hold an ``UPDATE`` whose rows the statement then uses:
    one statement, one round trip to the server, where SQLite takes two (in process)."""

    def statement(self, sql: str) -> str:
        """The statement as this backend's driver takes it."""
        return _pyformat(sql) if self is POSTGRES else sql

    def ddl(self, sql: str) -> str:
        """A DDL statement written for SQLite, in this backend's column types."""
        return _postgres_ddl(sql) if self is POSTGRES else sql


SQLITE = Dialect(
    name="sqlite",
    row_lock="",
    json_object="json_object",
    json_parse="json({})",
    json_array_agg="json_group_array({})",
    updates_in_with=False,
)

POSTGRES = Dialect(
    name="postgresql",
    row_lock=" FOR UPDATE",
    json_object="json_build_object",
    json_parse="{}::json",
    json_array_agg="coalesce(json_agg({}), '[]')::text",
    updates_in_with=True,
)

# Outside string literals: a placeholder, or a percent sign psycopg would read as one.
_QUOTED_OR_SPECIAL = re.compile(r"'[^']*'|[?%]")


@lru_cache(maxsize=2048)
def _pyformat(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s``, and a literal ``%`` doubled."""
    return _QUOTED_OR_SPECIAL.sub(_rewrite, sql)


def _rewrite(match: re.Match[str]) -> str:
    token = match.group()
    if token == "?":
        return "%s"
    if token == "%":
        return "%%"
    return token.replace("%", "%%")  # a literal: psycopg still parses % inside it


_DDL_TYPES = (
    # Sequences, counts and byte sizes outgrow PostgreSQL's 32-bit INTEGER;
    # SQLite's INTEGER is 64-bit.
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    # A SQLite storage option; PostgreSQL's tables are heaps with indexes either way.
    (re.compile(r"\)\s*WITHOUT ROWID"), ")"),
)


def _postgres_ddl(sql: str) -> str:
    for pattern, replacement in _DDL_TYPES:
        sql = pattern.sub(replacement, sql)
    return sql
