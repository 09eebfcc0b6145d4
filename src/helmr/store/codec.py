"""Conversions between Python values and the store's columns, and new ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pydantic import JsonValue
from ulid import ULID

from helmr.errors import InvalidInput

DbValue = str | int | float | None


def new_id(prefix: str) -> str:
    """``<prefix>_<ulid>``: unique, and sortable by creation time."""
    return f"{prefix}_{ULID()}"


def dump_json(value: JsonValue) -> str:
    """JSON text for a payload; rejects what JSON cannot represent (NaN, objects)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the value is not JSON: {exc}") from exc


def load_json(text: str | None) -> JsonValue:
    return None if text is None else json.loads(text)


def dump_time(value: datetime) -> str:
    """Fixed-width UTC text, so that text order is time order."""
    if value.tzinfo is None:
        raise ValueError("store timestamps must be timezone-aware")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def load_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def db_value(value: object) -> DbValue:
    """The column value for a Python value used in an update."""
    if isinstance(value, datetime):
        return dump_time(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str(value)  # a vocabulary's enum (helmr.states) is stored as its value
    if value is None or isinstance(value, int | float):
        return value
    raise TypeError(f"no column type for {type(value).__name__}")
