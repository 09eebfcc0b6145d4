"""The operator's Prometheus metrics, served on the API's /metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import Collector

from helmr.operator.storage_metrics import StoragePressureMetrics


class OperatorMetrics:
    def __init__(self) -> None:
        # registry=None: the API server's /metrics registry collects these.
        self.processes_started = Counter(
            "helmr_runner_processes_started",
            "Runner processes (pods) started, one per process epoch.",
            registry=None,
        )
        self.processes_ended = Counter(
            "helmr_runner_processes_ended",
            "Runner processes that ended, by outcome (stopped, failed, lost).",
            ["outcome"],
            registry=None,
        )
        self.turns_finished = Counter(
            "helmr_turns_finished",
            "Turns that reached a terminal status, by status.",
            ["status"],
            registry=None,
        )
        self.sessions_waiting = Gauge(
            "helmr_sessions_waiting_for_runner",
            "Sessions with queued work and no live runner process, at the last supervisor pass.",
            registry=None,
        )
        self.saves = Counter(
            "helmr_computer_saves",
            "Computer disk save attempts that ended, by outcome (ready, failed).",
            ["outcome"],
            registry=None,
        )
        self.save_duration = Histogram(
            "helmr_computer_save_duration_seconds",
            "From a completed Turn's save request to its snapshot being ready.",
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=None,
        )
        self.disks_created = Counter(
            "helmr_computer_disks_created",
            "Computer disks (claims) created, by source (empty, or restored from a save).",
            ["source"],
            registry=None,
        )
        self.storage_pressure = StoragePressureMetrics()

    @property
    def collectors(self) -> list[Collector]:
        return [
            self.processes_started,
            self.processes_ended,
            self.turns_finished,
            self.sessions_waiting,
            self.saves,
            self.save_duration,
            self.disks_created,
            *self.storage_pressure.collectors,
        ]
