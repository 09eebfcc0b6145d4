"""A Session's timeline for people: one line an event, saying what happened in words.

``12:04:31.207      7  turn.failed            turn_01J…  failed: tool_error: no such file``

The time is the event's (UTC), then its sequence, kind and Turn (``-`` for
Session facts), then a short summary of its data: the facts a reader acts
on (why a Turn ended, which hold to resume, which process), never the raw
record. Kinds without a phrase here show their data as ``key=value`` pairs.
``helmr session events`` and the demo print it; ``--json`` prints the records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any

from pydantic import JsonValue

from helmr.client import Event

MAX_SUMMARY = 160
"""Characters of summary a line shows at most (output can be long; the record keeps it all)."""

Data = Mapping[str, Any]


def line(event: Event) -> str:
    time = event.created_at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3]
    turn = event.turn_id or "-"
    return f"{time}  {event.sequence:>5}  {event.kind:<26} {turn:<31} {summary(event)}".rstrip()


def summary(event: Event) -> str:
    """What ``event`` says, in a few words."""
    if event.kind == "turn.output":
        text = _output(event.data)
    else:
        data: Data = event.data if isinstance(event.data, dict) else {}
        phrase = _PHRASES.get(event.kind)
        text = phrase(data) if phrase is not None else _pairs(data)
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def compact(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _words(code: object) -> str:
    return str(code).replace("_", " ")


def _pairs(data: Data) -> str:
    return " ".join(
        f"{key}={value if isinstance(value, str) else compact(value)}"
        for key, value in data.items()
        if value is not None
    )


def _output(data: JsonValue) -> str:
    # Text fragments read as their text, anything else as compact JSON.
    fragments = data if isinstance(data, list) else [data]
    parts = [
        str(f.get("text")) if f.get("type") == "text" else compact(f.get("json"))
        for f in fragments
        if isinstance(f, dict)
    ]
    return " ".join(" ".join(part.split()) for part in parts)


def _optional(data: Data, key: str, part: Callable[[Any], str]) -> str:
    """A phrase's optional part: ``part`` of ``data[key]``, or nothing when the
    event has no value for ``key``."""
    value = data.get(key)
    return part(value) if value else ""


def _reason(data: Data) -> str:
    return _optional(data, "reason", lambda reason: f": {_words(reason)}")


def _held(data: Data) -> str:
    return _optional(data, "holdId", lambda hold: f"; held: resume with --hold-id {hold}")


def _completed(data: Data) -> str:
    kept = [name for name in ("result", "response") if data.get(f"has{name.title()}")]
    return "completed" + (f" with a {' and a '.join(kept)}" if kept else "")


def _failed(data: Data) -> str:
    error = data.get("error")
    if not isinstance(error, dict):
        return "failed"
    code = error.get("code")
    return f"failed: {code + ': ' if code else ''}{error.get('message', '')}".rstrip(": ")


def _ended(how: str) -> Callable[[Data], str]:
    def phrase(data: Data) -> str:
        return how + _reason(data)

    return phrase


def _message(what: str) -> Callable[[Data], str]:
    def phrase(data: Data) -> str:
        return (
            f"message {data.get('messageId')} {what}"
            + _reason(data)
            + _optional(data, "error", lambda error: f" ({error})")
        )

    return phrase


def _process(data: Data) -> str:
    return f"process {data.get('processEpoch')}"


def _process_failed(data: Data) -> str:
    return (
        f"{_process(data)} failed: {_words(data.get('reason', 'process_failed'))}"
        + _optional(data, "detail", lambda detail: f" ({detail})")
        + _optional(data, "attempt", lambda n: f", attempt {n} of {data.get('maxAttempts')}")
        + _held(data)
    )


def _lost(data: Data) -> str:
    version = data.get("computerVersion")
    unavailable = data.get("savesUnavailable")
    if unavailable and not version:
        return (
            f"{_process(data)} lost; the next one starts from an empty disk:"
            f" nothing was saved (saves are unavailable: {unavailable})"
        )
    restore = f"save {version}" if version else "a fresh disk"
    later = f" (no later save: saves are unavailable: {unavailable})" if unavailable else ""
    return f"{_process(data)} lost; the next one starts from {restore}{later}"


def _recovery_gap(data: Data) -> str:
    turns = data.get("turnIds") or []
    point = data.get("restorePoint")
    since = f"save {point}" if point else "a fresh disk"
    return f"restored {since}: {len(turns)} completed turn(s) may have lost files" + _held(data)


def _interrupt(data: Data) -> str:
    stopping = f"turn {data['turnId']} stopping" if data.get("turnId") else "no turn was running"
    return f"interrupted ({data.get('scope', 'session')}): {stopping}" + _held(data)


def _storage(data: Data) -> str:
    used, capacity = data.get("usedBytes"), data.get("capacityBytes")
    share = f" ({100 * used / capacity:.0f}% of {capacity} bytes)" if used and capacity else ""
    return f"disk {_words(data.get('state'))}: {used} bytes used{share}" + _held(data)


_PHRASES: dict[str, Callable[[Data], str]] = {
    "turn.queued": lambda d: f"queued as #{d.get('sequence')} from {d.get('source')}",
    "turn.running": lambda d: (
        f"running on {_process(d)}" + _optional(d, "tags", lambda tags: f" [{', '.join(tags)}]")
    ),
    "turn.completed": _completed,
    "turn.failed": _failed,
    "turn.interrupted": _ended("interrupted"),
    "turn.cancelled": _ended("cancelled"),
    "message.admitted": _message("admitted"),
    "message.started": _message("handler started"),
    "message.delivered": _message("delivered"),
    "message.rejected": _message("rejected"),
    "session.interrupt": _interrupt,
    "session.resume": lambda d: f"hold {d.get('holdId')} released; queued turns run again",
    "session.close": lambda d: "closing: accepted turns finish first",
    "session.closed": lambda d: f"closed ({_words(d.get('how'))})" if d.get("how") else "closed",
    "session.process_stopped": lambda d: f"{_process(d)} stopped: {_words(d.get('reason'))}",
    "session.process_failed": _process_failed,
    "session.execution_lost": _lost,
    "session.recovery_gap": _recovery_gap,
    "session.storage_pressure": _storage,
}
