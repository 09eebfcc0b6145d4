"""The timeline as people read it: one line an event, its data said in words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import JsonValue

from helmr.cli import timeline
from helmr.client import Event
from helmr.events import EventKind

TURN = "turn_01JDEMO0000000000000000000"


def event(kind: str, data: JsonValue, turn_id: str | None = TURN) -> Event:
    return Event(
        id="e",
        session_id="ses_1",
        turn_id=turn_id,
        sequence=7,
        created_at=datetime(2030, 1, 2, 12, 4, 31, 207000, tzinfo=UTC),
        kind=EventKind(kind),
        data=data,
    )


def test_a_line_is_time_sequence_kind_turn_and_summary() -> None:
    line = timeline.line(event("turn.running", {"processEpoch": 3}))

    assert line.split() == [
        "12:04:31.207",
        "7",
        "turn.running",
        TURN,
        "running",
        "on",
        "process",
        "3",
    ]


def test_a_session_fact_has_no_turn() -> None:
    line = timeline.line(event("session.closed", {"how": "cancel"}, turn_id=None))

    assert line.split()[3:] == ["-", "closed", "(cancel)"]


@pytest.mark.parametrize(
    ("kind", "data", "summary"),
    [
        ("turn.queued", {"sequence": 2, "source": "api"}, "queued as #2 from api"),
        (
            "turn.running",
            {"processEpoch": 3, "metadata": {"a": 1}, "tags": ["review", "APP-42"]},
            "running on process 3 [review, APP-42]",
        ),
        ("turn.completed", {"hasResult": True, "hasResponse": False}, "completed with a result"),
        (
            "turn.completed",
            {"hasResult": True, "hasResponse": True},
            "completed with a result and a response",
        ),
        ("turn.completed", {"hasResult": False, "hasResponse": False}, "completed"),
        (
            "turn.failed",
            {"error": {"code": "tool_error", "message": "no such file"}},
            "failed: tool_error: no such file",
        ),
        (
            "turn.interrupted",
            {"reason": "turn_deadline_elapsed"},
            "interrupted: turn deadline elapsed",
        ),
        ("turn.cancelled", {"reason": "cancel"}, "cancelled: cancel"),
        ("turn.output", [{"type": "text", "text": "Checking\n the build"}], "Checking the build"),
        ("turn.output", [{"type": "json", "json": {"issue": "APP-42"}}], '{"issue":"APP-42"}'),
        ("message.admitted", {"messageId": "msg_1"}, "message msg_1 admitted"),
        (
            "message.rejected",
            {"messageId": "msg_1", "reason": "turn_settling"},
            "message msg_1 rejected: turn settling",
        ),
        (
            "message.rejected",
            {
                "messageId": "msg_2",
                "reason": "handler_failed",
                "outcome": "unknown",
                "error": "KeyError: 'x'",
            },
            "message msg_2 rejected: handler failed (KeyError: 'x')",
        ),
        (
            "session.interrupt",
            {"holdId": "hold_1", "turnId": "turn_9", "scope": "session"},
            "interrupted (session): turn turn_9 stopping; held: resume with --hold-id hold_1",
        ),
        (
            "session.resume",
            {"holdId": "hold_1", "how": "resume"},
            "hold hold_1 released; queued turns run again",
        ),
        (
            "session.process_failed",
            {"processEpoch": 2, "reason": "exit_nonzero", "holdId": None},
            "process 2 failed: exit nonzero",
        ),
        (
            "session.process_failed",
            {
                "processEpoch": 4,
                "reason": "preparation_failed",
                "detail": "ErrImagePull",
                "attempt": 1,
                "maxAttempts": 3,
                "holdId": None,
            },
            "process 4 failed: preparation failed (ErrImagePull), attempt 1 of 3",
        ),
        (
            "session.execution_lost",
            {"processEpoch": 3, "computerId": "c", "computerVersion": 5},
            "process 3 lost; the next one starts from save 5",
        ),
        (
            "session.execution_lost",
            {
                "processEpoch": 3,
                "computerId": "c",
                "computerVersion": None,
                "savesUnavailable": "no VolumeSnapshot API",
            },
            "process 3 lost; the next one starts from an empty disk: nothing was saved"
            " (saves are unavailable: no VolumeSnapshot API)",
        ),
        (
            "session.recovery_gap",
            {"restorePoint": None, "computerId": "c", "turnIds": ["a", "b"], "holdId": "hold_2"},
            "restored a fresh disk: 2 completed turn(s) may have lost files;"
            " held: resume with --hold-id hold_2",
        ),
        (
            "slack.delivery_unavailable",
            {"channel": "C1", "detail": {"code": 1}},
            'channel=C1 detail={"code":1}',
        ),
    ],
)
def test_each_kind_reads_as_words(kind: str, data: JsonValue, summary: str) -> None:
    assert timeline.summary(event(kind, data)) == summary


def test_no_summary_prints_a_python_dict() -> None:
    for kind in EventKind:
        text = timeline.summary(event(kind, {"holdId": "h", "reason": "r", "processEpoch": 1}))
        assert "{'" not in text, kind


def test_long_output_is_cut_to_one_short_line() -> None:
    text = timeline.summary(event("turn.output", [{"type": "text", "text": "word " * 100}]))

    assert len(text) == timeline.MAX_SUMMARY
    assert text.endswith("…")
