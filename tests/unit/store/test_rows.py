"""Store rows read from their columns (helmr.store.rows._load)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest
from pydantic import JsonValue

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
