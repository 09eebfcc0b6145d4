"""The metrics read off a real timeline: a store and Control make the events, the
clock says exactly how long each wait took, and the exposition is read back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry
from pydantic import JsonValue

from helmr.events import Event, EventKind
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.states import ErrorInfo
from tests.unit.control.harness import Harness


def _reader(metrics: OperatorMetrics) -> Callable[..., float | None]:
    """``value(name, **labels)``: a sample of the metrics as exposed."""
    registry = CollectorRegistry()
    for collector in metrics.collectors:
        registry.register(collector)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    return value


async def _follow(h: Harness, metrics: OperatorMetrics, session_id: str, *, count: bool) -> None:
    page = await h.control.list_events(session_id, 0, 1000)
    for event in page.records:
        metrics.timeline.observe(event, count=count)


def _seconds(delta: float) -> timedelta:
    return timedelta(seconds=delta)


async def test_waits_durations_and_outcomes(h: Harness) -> None:
    metrics = OperatorMetrics()
    timeline = metrics.timeline
    session = await h.session()
    await h.control.enqueue(session.id, "a")  # queued at 0
    epoch = await h.control.process_started(session.id)
    timeline.pod_created(session.id, epoch, h.clock.advance(_seconds(1)))
    timeline.runner_connected(session.id, epoch, h.clock.advance(_seconds(2)))  # 3
    timeline.runner_connected(session.id, epoch, h.clock.advance(_seconds(0.25)))  # not again
    h.clock.advance(_seconds(0.25))
    first = await h.control.receive(session.id, epoch, timeout=0)  # runs at 3.5
    assert first is not None
    h.clock.advance(_seconds(4))
    await h.control.complete(session.id, epoch, first.id, result=1)  # ends at 7.5
    h.clock.advance(_seconds(1))
    await h.control.enqueue(session.id, "b")  # queued at 8.5, the runner idle since 7.5
    h.clock.advance(_seconds(0.25))
    second = await h.control.receive(session.id, epoch, timeout=0)
    assert second is not None
    h.clock.advance(_seconds(1))
    await h.control.fail(session.id, epoch, second.id, ErrorInfo(code="boom", message="no"))
    await _follow(h, metrics, session.id, count=True)

    value = _reader(metrics)

    assert value("helmr_runner_cold_start_seconds_count") == 1
    assert value("helmr_runner_cold_start_seconds_sum") == 2
    assert value("helmr_turn_queue_wait_seconds_count") == 2
    assert value("helmr_turn_queue_wait_seconds_sum") == 3.5 + 0.25
    # From the runner connecting (3), then from the second Turn's admission (8.5).
    assert value("helmr_turn_dispatch_seconds_sum") == 0.5 + 0.25
    assert value("helmr_turn_duration_seconds_sum", status="completed") == 4
    assert value("helmr_turn_duration_seconds_sum", status="failed") == 1
    assert value("helmr_turns_finished_total", status="completed", reason="none") == 1
    assert value("helmr_turns_finished_total", status="failed", reason="none") == 1


async def test_holds_and_process_failures(h: Harness) -> None:
    metrics = OperatorMetrics()
    session = await h.session()
    for _ in range(3):  # the third consecutive failure holds the Session
        epoch = await h.control.process_started(session.id)
        ended = await h.control.process_exited(session.id, epoch, 1)
    assert ended.hold_id is not None
    await h.control.resume(session.id, ended.hold_id)
    receipt = await h.control.interrupt(session.id)
    await _follow(h, metrics, session.id, count=True)
    await h.control.cancel(session.id)  # ends the Session with its interrupt hold
    metrics.timeline.session_ended(session.id)
    metrics.timeline.session_ended(session.id)  # told again: released once

    value = _reader(metrics)

    assert receipt.hold_id is not None
    assert value("helmr_process_failures_total", reason="process_failed") == 3
    assert value("helmr_holds_opened_total", reason="process_failures") == 1
    assert value("helmr_holds_released_total", reason="process_failures") == 1
    assert value("helmr_holds_opened_total", reason="interrupt") == 1
    assert value("helmr_holds_released_total", reason="interrupt") == 1


async def test_events_older_than_the_process_are_remembered_not_counted(h: Harness) -> None:
    metrics = OperatorMetrics()
    session = await h.session()
    await h.control.enqueue(session.id, "a")
    await _follow(h, metrics, session.id, count=False)  # before a restart, say
    epoch = await h.control.process_started(session.id)
    h.clock.advance(_seconds(5))
    assert await h.control.receive(session.id, epoch, timeout=0) is not None
    page = await h.control.list_events(session.id, 1, 1000)
    for event in page.records:
        metrics.timeline.observe(event, count=True)

    value = _reader(metrics)
    assert value("helmr_turn_queue_wait_seconds_sum") == 5
    assert value("helmr_turns_finished_total") is None


async def test_session_counts_by_phase_and_hold(h: Harness) -> None:
    metrics = OperatorMetrics()
    held = await h.session()
    await h.control.interrupt(held.id)
    closed = await h.session()
    await h.control.cancel(closed.id)
    await h.session()
    metrics.count_sessions(await h.control.session_counts())

    value = _reader(metrics)

    assert value("helmr_sessions", phase="open") == 2
    assert value("helmr_sessions", phase="closed") == 1
    assert value("helmr_sessions", phase="failed") == 0  # every phase is exposed
    assert value("helmr_sessions_held", reason="interrupt") == 1
    assert value("helmr_sessions_held", reason="process_failures") == 0


def _event(sequence: int, kind: EventKind, data: dict[str, JsonValue]) -> Event:
    return Event(
        id=f"ses_1:{sequence}",
        session_id="ses_1",
        turn_id=None,
        sequence=sequence,
        created_at=datetime(2030, 1, 1, tzinfo=UTC),
        kind=kind,
        data=data,
    )


def test_a_hold_that_replaces_another_releases_it() -> None:
    metrics = OperatorMetrics()
    pressure = EventKind.SESSION_STORAGE_PRESSURE
    for event in [
        _event(1, pressure, {"state": "paused", "holdId": "hold_a"}),
        _event(2, pressure, {"state": "stopped", "holdId": "hold_a"}),  # the same hold
        _event(3, EventKind.SESSION_INTERRUPT, {"holdId": "hold_b", "scope": "session"}),
        _event(4, pressure, {"state": "resolved", "holdId": "hold_a"}),  # already gone
        _event(5, EventKind.SESSION_RESUME, {"holdId": "hold_b", "how": "resume"}),
    ]:
        metrics.timeline.observe(event, count=True)

    value = _reader(metrics)

    assert value("helmr_holds_opened_total", reason="storage_pressure") == 1
    assert value("helmr_holds_released_total", reason="storage_pressure") == 1
    assert value("helmr_holds_opened_total", reason="interrupt") == 1
    assert value("helmr_holds_released_total", reason="interrupt") == 1


def test_a_pressure_hold_that_became_a_gaps_is_released_by_its_resume_only() -> None:
    """A recovery gap naming a disk pressure hold makes it the gap's: counted as
    released for the pressure and opened for the gap, and the episode resolving
    releases nothing (the gap still waits for its resume)."""
    metrics = OperatorMetrics()
    pressure = EventKind.SESSION_STORAGE_PRESSURE
    value = _reader(metrics)
    for event in [
        _event(1, pressure, {"state": "paused", "holdId": "hold_a"}),
        _event(2, EventKind.SESSION_RECOVERY_GAP, {"turnIds": ["turn_1"], "holdId": "hold_a"}),
        _event(3, pressure, {"state": "resolved", "holdId": "hold_a"}),
    ]:
        metrics.timeline.observe(event, count=True)

    assert value("helmr_holds_opened_total", reason="storage_pressure") == 1
    assert value("helmr_holds_released_total", reason="storage_pressure") == 1
    assert value("helmr_holds_opened_total", reason="recovery_gap") == 1
    assert not value("helmr_holds_released_total", reason="recovery_gap")

    resume: dict[str, JsonValue] = {"holdId": "hold_a", "how": "resume"}
    metrics.timeline.observe(_event(4, EventKind.SESSION_RESUME, resume), count=True)
    assert value("helmr_holds_released_total", reason="recovery_gap") == 1
