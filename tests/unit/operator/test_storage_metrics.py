"""The storage pressure metrics: episodes counted by state off the timeline, and the
Sessions in an episode read from the store."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, generate_latest
from pydantic import JsonValue

from helmr.control import StorageLimits
from helmr.events import Event, EventKind
from helmr.operator.telemetry.storage_pressure import StoragePressureMetrics
from tests.unit.control.harness import Harness


def _event(kind: EventKind, data: JsonValue) -> Event:
    return Event(
        id="e",
        session_id="ses_1",
        turn_id=None,
        sequence=1,
        created_at=datetime.now(UTC),
        kind=kind,
        data=data,
    )


def _exposed(metrics: StoragePressureMetrics) -> str:
    registry = CollectorRegistry()
    for collector in metrics.collectors:
        registry.register(collector)
    return generate_latest(registry).decode()


def test_episodes_are_counted_by_the_state_they_reached() -> None:
    metrics = StoragePressureMetrics()
    for state in ("paused", "stopped", "resolved", "paused"):
        metrics.observe(_event(EventKind.SESSION_STORAGE_PRESSURE, {"state": state}))
    metrics.observe(_event(EventKind.SESSION_INTERRUPT, {"state": "paused"}))

    text = _exposed(metrics)
    assert 'helmr_storage_pressure_episodes_total{state="paused"} 2.0' in text
    assert 'helmr_storage_pressure_episodes_total{state="stopped"} 1.0' in text
    assert 'helmr_storage_pressure_episodes_total{state="resolved"} 1.0' in text


async def test_the_sessions_under_pressure_are_the_stores_open_episodes(h: Harness) -> None:
    limits = StorageLimits(capacity_bytes=100, pause_at=0.9, stop_at=0.98, resolve_at=0.85)
    paused, calm = await h.session(), await h.session()
    for session in (paused, calm):
        await h.control.set_storage_limits(session.id, limits)
    await h.control.report_storage(paused.id, await h.control.process_started(paused.id), 95)
    await h.control.report_storage(calm.id, await h.control.process_started(calm.id), 10)
    assert await h.control.sessions_under_storage_pressure() == 1
    await h.control.fail_session(paused.id, "gone")  # an ended Session counts no more
    assert await h.control.sessions_under_storage_pressure() == 0
