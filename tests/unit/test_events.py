"""Event kinds, records, lifecycle ids and output content normalization."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import JsonValue

from helmr.events import Event, EventKind, EventPage, lifecycle_event_id, normalize_content

SPEC_KINDS = [
    "turn.queued",
    "turn.running",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "turn.cancelled",
    "turn.output",
    "message.admitted",
    "message.started",
    "message.delivered",
    "message.rejected",
    "ask.created",
    "ask.answered",
    "ask.cancelled",
    "session.interrupt",
    "session.resume",
    "session.close",
    "session.closed",
    "session.process_stopped",
    "session.process_failed",
    "session.recovery_gap",
    "session.storage_pressure",
    "slack.delivery_unavailable",
    "session.execution_lost",
]


def test_every_spec_kind_is_an_event_kind() -> None:
    assert sorted(kind.value for kind in EventKind) == sorted(SPEC_KINDS)


def test_lifecycle_ids_are_deterministic_per_subject() -> None:
    assert (
        lifecycle_event_id("ses_1", EventKind.TURN_COMPLETED, "turn_9")
        == "ses_1:turn.completed:turn_9"
    )
    assert (
        lifecycle_event_id("ses_1", EventKind.SESSION_PROCESS_FAILED, 3)
        == "ses_1:session.process_failed:3"
    )
    assert lifecycle_event_id("ses_1", EventKind.SESSION_CLOSED) == "ses_1:session.closed"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("Working", [{"type": "text", "text": "Working"}]),
        ("", [{"type": "text", "text": ""}]),
        ({"received": 1}, [{"type": "json", "json": {"received": 1}}]),
        (None, [{"type": "json", "json": None}]),
        (42, [{"type": "json", "json": 42}]),
        ([], [{"type": "json", "json": []}]),
        ([1, 2], [{"type": "json", "json": [1, 2]}]),
        (
            [{"type": "text", "text": "a"}, {"type": "json", "json": {"b": [1]}}],
            [{"type": "text", "text": "a"}, {"type": "json", "json": {"b": [1]}}],
        ),
        # Not valid fragments, so plain JSON: wrong field type, extra field, unknown type.
        (
            [{"type": "text", "text": 1}],
            [{"type": "json", "json": [{"type": "text", "text": 1}]}],
        ),
        (
            [{"type": "text", "text": "a", "extra": 1}],
            [{"type": "json", "json": [{"type": "text", "text": "a", "extra": 1}]}],
        ),
        (
            [{"type": "image", "url": "x"}],
            [{"type": "json", "json": [{"type": "image", "url": "x"}]}],
        ),
    ],
)
def test_output_values_become_content_fragments(value: JsonValue, content: JsonValue) -> None:
    assert normalize_content(value) == content


def test_records_and_pages_use_the_rest_field_names() -> None:
    event = Event(
        id="evt_1",
        session_id="ses_1",
        turn_id=None,
        sequence=1,
        created_at=datetime(2030, 1, 1, tzinfo=UTC),
        kind=EventKind.SESSION_CLOSED,
        data={"how": "close"},
    )
    page = EventPage(records=[event], next_after=1, has_more=False, retained_after=0)
    dumped = page.model_dump(mode="json")
    assert set(dumped) == {"records", "next_after", "has_more", "retained_after"}
    assert dumped["records"][0] == {
        "id": "evt_1",
        "session_id": "ses_1",
        "turn_id": None,
        "sequence": 1,
        "created_at": "2030-01-01T00:00:00Z",
        "kind": "session.closed",
        "data": {"how": "close"},
        "process_epoch": None,
    }


def test_the_sdk_exports_the_spec_names_of_events_pages_and_kinds() -> None:
    """spec/002: "The SDK exports SessionEvent, SessionEventKind and SessionEventPage"."""
    import helmr.client
    from helmr.events import SessionEvent, SessionEventKind, SessionEventPage

    assert (SessionEvent, SessionEventKind, SessionEventPage) == (Event, EventKind, EventPage)
    for model in (SessionEvent, SessionEventKind, SessionEventPage):
        assert model.__name__ in {"SessionEvent", "SessionEventKind", "SessionEventPage"}
        assert getattr(helmr.client, model.__name__) is model
