"""Store rows read from their columns (helmr.store.rows._load)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest
from pydantic import JsonValue

from helmr.store.postgres import _row_class
from helmr.store.rows import _load


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    live: bool
    at: datetime
    data: JsonValue
    extra: str


@dataclass(frozen=True, slots=True)
class _One:
    id: str


@dataclass(frozen=True, slots=True)
class _Durations:
    _COLUMNS: ClassVar[dict[str, str]] = {"ttl": "ttl_s", "backoff": "backoff_s"}

    ttl: timedelta | None
    backoff: timedelta


@dataclass(frozen=True, slots=True)
class _GivenFirst:
    extra: str
    id: str


def _row(sql: str) -> sqlite3.Row:
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    row: sqlite3.Row = conn.execute(sql).fetchone()
    return row


def test_each_field_is_its_column_decoded_whatever_the_columns_order() -> None:
    # Columns in another order than the fields, and one no field reads.
    row = _row(
        "SELECT '[1, {\"a\": null}]' AS data, 'x' AS other, 1 AS live,"
        " '2026-12-04T19:00:00.000001+00:00' AS at, 'r1' AS id"
    )
    loaded = _load(_Row, row, extra="given")
    at = datetime(2026, 12, 4, 19, 0, 0, 1, tzinfo=UTC)
    assert loaded == _Row(id="r1", live=True, at=at, data=[1, {"a": None}], extra="given")


def test_a_row_of_one_field() -> None:
    assert _load(_One, _row("SELECT 'r1' AS id, 2 AS other")) == _One(id="r1")


def test_a_field_no_column_holds_is_refused() -> None:
    with pytest.raises(LookupError, match="no column extra"):
        _load(_Row, _row("SELECT 'r1' AS id, 1 AS live, '' AS at, 'null' AS data"))


def test_a_given_field_before_a_column_one_is_refused() -> None:
    # The columns are passed by position: a given field among them would shift them.
    with pytest.raises(TypeError, match="come last"):
        _load(_GivenFirst, _row("SELECT 'r1' AS id"), extra="given")


def test_a_field_reads_the_column_the_class_names_for_it() -> None:
    row = _row("SELECT 1.5 AS backoff_s, NULL AS ttl_s, 3 AS ttl, 4 AS backoff")
    assert _load(_Durations, row) == _Durations(ttl=None, backoff=timedelta(seconds=1.5))


def test_a_postgres_row_is_read_without_its_python_subscript() -> None:
    # A PgRow's subscript is Python (it takes names too): called once per field, it
    # cost PostgreSQL about 5% of a no-op Turn's instructions (docs/sizing.md).
    names = ("other", "data", "at", "live", "id")
    row_class = _row_class(tuple(name.encode() for name in names))
    subscripts = 0

    class Counted(row_class):  # type: ignore[misc, valid-type]
        __slots__ = ()

        def __getitem__(self, key: object) -> object:
            nonlocal subscripts
            subscripts += 1
            return super().__getitem__(key)

    at = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
    row = Counted(("x", "[1]", "2026-12-05T03:00:00+00:00", True, "r1"))
    assert row["id"] == "r1"  # by name, as the store's functions read a column
    subscripts = 0
    loaded = _load(_Row, row, extra="given")
    assert loaded == _Row(id="r1", live=True, at=at, data=[1], extra="given")
    assert subscripts == 0
