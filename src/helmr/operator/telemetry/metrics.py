"""The operator's Prometheus metrics, served on the API's /metrics.

Every label takes values from a bounded vocabulary (statuses, reasons and
outcomes the code names, never user input). Most of these are observed in one
place, the timeline the status mirror follows
(:mod:`helmr.operator.telemetry.timeline_metrics`); the Session counts are read from the
store at each scrape (:meth:`OperatorMetrics.count_sessions`).
"""

from __future__ import annotations

from prometheus_client.registry import Collector

from helmr.control import SessionCounts
from helmr.control.disks import RecoveryPoints
from helmr.operator.telemetry.collectors import counter, gauge, histogram
from helmr.operator.telemetry.storage_pressure import StoragePressureMetrics
from helmr.operator.telemetry.timeline_metrics import TimelineMetrics
from helmr.operator.telemetry.warm_pools import WarmPoolMetrics
from helmr.states import HoldReason, SessionStatus, values

# Histogram buckets (seconds), each spanning what its quantity plausibly takes.
_STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class OperatorMetrics:
    def __init__(self) -> None:
        self.processes_started = counter(
            "helmr_runner_processes_started",
            "Runner processes (pods) started, one per process epoch.",
        )
        self.processes_ended = counter(
            "helmr_runner_processes_ended",
            "Runner processes that ended, by outcome (stopped, failed, lost).",
            ["outcome"],
        )
        self.sessions = gauge(
            "helmr_sessions",
            "Sessions in the store by phase (open, closing, closed, failed), read at scrape.",
            ["phase"],
        )
        self.sessions_held = gauge(
            "helmr_sessions_held",
            "Sessions held now, by the hold's reason, read at scrape.",
            ["reason"],
        )
        self.store_transactions = histogram(
            "helmr_store_transaction_duration_seconds",
            "Store transactions from asked to done (queueing for a connection or the writer"
            " included), by kind (read, write) and lane (requests: the APIs'; background: the"
            " leader's reconciliation).",
            _STORE_BUCKETS,
            ["kind", "lane"],
        )
        self.sessions_waiting = gauge(
            "helmr_sessions_waiting_for_runner",
            "Sessions with queued work and no live runner process, at the last supervisor pass.",
        )
        self.saves = counter(
            "helmr_computer_saves",
            "Computer disk save attempts that ended, by outcome (ready, failed), and"
            " saves covered by a newer one taken in their place (covered).",
            ["outcome"],
        )
        self.save_duration = histogram(
            "helmr_computer_save_duration_seconds",
            "From a completed Turn's save request to its snapshot being ready.",
            (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
        )
        self.save_cut = histogram(
            "helmr_computer_save_cut_seconds",
            "From a completed Turn's save request to its point in time being cut (the"
            " snapshot's creationTime seen): what the Session's next Turn waits for.",
            (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.recovery_point_age = gauge(
            "helmr_computer_recovery_point_age_seconds",
            "The age of the oldest completed Turn whose save is not committed yet, over all"
            " Sessions (0: none): how much completed work an execution loss would lose now.",
        )
        self.recovery_point_lag = histogram(
            "helmr_computer_recovery_point_lag_seconds",
            "Per save that became ready: how long the oldest completed Turn it committed"
            " (its own, or one it covered) had been unsaved.",
            (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
        )
        self.saves_in_flight = gauge(
            "helmr_computer_saves_in_flight",
            "Workspaces with a save being taken (its VolumeSnapshot asked for, not yet ready).",
        )
        self.disks_created = counter(
            "helmr_computer_disks_created",
            "Computer disks (claims) created, by source (empty, or restored from a save).",
            ["source"],
        )
        self.storage_pressure = StoragePressureMetrics()
        self.restores_failed = counter(
            "helmr_computer_restores_failed",
            "Restores that could not be made (their save gone or unusable): each fails its "
            "Session.",
        )

        self.timeline = TimelineMetrics()
        self.warm_pools = WarmPoolMetrics()

    def store_transaction(self, kind: str, lane: str, seconds: float) -> None:
        """The store's observer (``Store.observe``)."""
        self.store_transactions.labels(kind, lane).observe(seconds)

    def count_sessions(self, counts: SessionCounts) -> None:
        """Sets the Session gauges from the store's counts; every phase and hold
        reason is set, so one that emptied reads 0 rather than its last value."""
        for phase in values(SessionStatus):
            self.sessions.labels(phase).set(counts.by_status.get(phase, 0))
        for reason in values(HoldReason):
            self.sessions_held.labels(reason).set(counts.held.get(reason, 0))

    def recovery_points(self, points: RecoveryPoints) -> None:
        """Sets the recovery point gauges from the store's view."""
        self.recovery_point_age.set(points.oldest_unsaved_age.total_seconds())
        self.saves_in_flight.set(points.saves_in_flight)

    @property
    def collectors(self) -> list[Collector]:
        return [
            self.processes_started,
            self.processes_ended,
            self.sessions,
            self.sessions_held,
            self.store_transactions,
            self.sessions_waiting,
            self.saves,
            self.save_duration,
            self.save_cut,
            self.recovery_point_age,
            self.recovery_point_lag,
            self.saves_in_flight,
            self.disks_created,
            *self.timeline.collectors,
            *self.storage_pressure.collectors,
            self.restores_failed,
            *self.warm_pools.collectors,
        ]
