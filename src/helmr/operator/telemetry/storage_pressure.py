"""Metrics of Computer disk pressure: episodes by the state they reached, counted off
the timeline (``session.storage_pressure``), and the Sessions in an episode now,
read from the store at each supervisor pass."""

from __future__ import annotations

from prometheus_client.registry import Collector

from helmr.events import Event, EventKind
from helmr.operator.telemetry.collectors import counter, gauge
from helmr.states import StoragePressureState, values


class StoragePressureMetrics:
    def __init__(self) -> None:
        self.episodes = counter(
            "helmr_storage_pressure_episodes",
            "Computer disk pressure transitions (session.storage_pressure), by the state "
            "an episode reached (paused, stopped, resolved).",
            ["state"],
        )
        self.sessions = gauge(
            "helmr_sessions_under_storage_pressure",
            "Sessions whose Computer disk is in a pressure episode (paused or stopped, not "
            "resolved yet), at the last supervisor pass.",
        )
        for state in values(StoragePressureState):
            self.episodes.labels(state)  # every state reads 0 until it happens

    def observe(self, event: Event) -> None:
        """Counts a ``session.storage_pressure`` event (any other kind is ignored)."""
        if event.kind != EventKind.SESSION_STORAGE_PRESSURE or not isinstance(event.data, dict):
            return
        state = event.data.get("state")
        if state in values(StoragePressureState):
            self.episodes.labels(state).inc()

    @property
    def collectors(self) -> list[Collector]:
        return [self.episodes, self.sessions]
