"""Metrics read off the Session timelines: the facts Control recorded, observed in one place.

``OperatorMetrics.timeline`` is one. The status mirror passes every event it
follows to :meth:`TimelineMetrics.observe`, so turn outcomes, waits, process
failures and holds are counted from what was committed, never where Control
decides them. Events from before this process
started still update what is remembered (a Turn queued before a restart has
its queue wait measured when it runs) but are not counted again.

Two facts are not in the timeline and are told directly: a runner pod created
(the supervisor) and a runner's first ``receive`` of its epoch (the runner
API), which end a cold start and make the runner idle.

What is remembered is bounded by what is live: a Turn until its terminal
event, a Session's runner and hold until the Session ends (:meth:`session_ended`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from helmr.events import Event, EventKind
from helmr.states import HoldReason

if TYPE_CHECKING:  # OperatorMetrics makes its TimelineMetrics
    from helmr.operator.telemetry.metrics import OperatorMetrics

_ENDINGS = {
    EventKind.TURN_COMPLETED: "completed",
    EventKind.TURN_FAILED: "failed",
    EventKind.TURN_INTERRUPTED: "interrupted",
    EventKind.TURN_CANCELLED: "cancelled",
}
# Events that name the Session's hold (holdId) and the reason of a hold they open.
# One naming a hold the Session already has (storage pressure on a held Session)
# opens none.
_HOLDING: dict[EventKind, HoldReason] = {
    EventKind.SESSION_INTERRUPT: "interrupt",
    EventKind.SESSION_PROCESS_FAILED: "process_failures",
    EventKind.SESSION_RECOVERY_GAP: "recovery_gap",
    EventKind.SESSION_STORAGE_PRESSURE: "storage_pressure",
}
# A storage pressure episode that resolved released its hold (if still open).
_STORAGE_RESOLVED = "resolved"
NO_REASON = "none"


def _data(event: Event, key: str) -> object:
    return event.data.get(key) if isinstance(event.data, dict) else None


class TimelineMetrics:
    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics
        # Turn id -> when it was queued, and when it started running.
        self._queued_at: dict[str, datetime] = {}
        self._running_at: dict[str, datetime] = {}
        # Session id -> (epoch, when) of: its newest runner pod; the runner that
        # connected; since when that runner has been idle (none while it runs a Turn).
        self._pods: dict[str, tuple[int, datetime]] = {}
        self._connected: dict[str, int] = {}
        self._idle_since: dict[str, tuple[int, datetime]] = {}
        # Session id -> its open hold: id, reason, and whether its opening was counted.
        self._holds: dict[str, tuple[str, HoldReason, bool]] = {}

    def pod_created(self, session_id: str, epoch: int, at: datetime) -> None:
        self._pods[session_id] = (epoch, at)

    def runner_connected(self, session_id: str, epoch: int, at: datetime) -> None:
        """A runner asked for work: the first time for its epoch it has connected
        (its cold start ends) and is idle."""
        if self._connected.get(session_id) == epoch:
            return
        self._connected[session_id] = epoch
        self._idle_since[session_id] = (epoch, at)
        pod = self._pods.pop(session_id, None)
        if pod is not None and pod[0] == epoch:
            self.metrics.cold_start.observe((at - pod[1]).total_seconds())

    def session_ended(self, session_id: str) -> None:
        """Forgets the Session; a hold it ended with is released with it."""
        self._release(session_id, None, count=True)
        for remembered in (self._pods, self._connected, self._idle_since):
            remembered.pop(session_id, None)

    def observe(self, event: Event, *, count: bool) -> None:
        """Takes in one timeline event in order; ``count`` False for events older
        than this process (remembered, not counted)."""
        if event.kind == EventKind.TURN_QUEUED and event.turn_id is not None:
            self._queued_at[event.turn_id] = event.created_at
        elif event.kind == EventKind.TURN_RUNNING and event.turn_id is not None:
            self._running(event, count)
        elif event.kind in _ENDINGS and event.turn_id is not None:
            self._ended(event, _ENDINGS[event.kind], count)
        elif event.kind == EventKind.SESSION_RESUME:
            self._resumed(event, count)
        if event.kind == EventKind.SESSION_PROCESS_FAILED and count:
            self.metrics.process_failures.labels(str(_data(event, "reason"))).inc()
        hold_id = _data(event, "holdId")
        if event.kind in _HOLDING and isinstance(hold_id, str):
            if _data(event, "state") == _STORAGE_RESOLVED:
                self._release(event.session_id, hold_id, count=count)
            else:
                self._held(event.session_id, hold_id, _HOLDING[event.kind], count)

    def _held(self, session_id: str, hold_id: str, reason: HoldReason, count: bool) -> None:
        held = self._holds.get(session_id)
        if held is not None and held[0] == hold_id:
            return  # the hold the Session already has
        # A Session has one hold at a time: one it had is gone (an interrupt
        # replaces a storage pressure hold).
        self._release(session_id, None, count=count)
        self._holds[session_id] = (hold_id, reason, count)
        if count:
            self.metrics.holds_opened.labels(reason).inc()

    def _release(self, session_id: str, hold_id: str | None, *, count: bool) -> None:
        """Releases the Session's hold (``hold_id``, or whichever it has); counted if
        its opening was."""
        held = self._holds.get(session_id)
        if held is None or (hold_id is not None and held[0] != hold_id):
            return
        del self._holds[session_id]
        if count and held[2]:
            self.metrics.holds_released.labels(held[1]).inc()

    def _running(self, event: Event, count: bool) -> None:
        assert event.turn_id is not None
        started = event.created_at
        self._running_at[event.turn_id] = started
        queued = self._queued_at.pop(event.turn_id, None)
        idle = self._idle_since.pop(event.session_id, None)
        if queued is None or not count:
            return
        self.metrics.queue_wait.observe((started - queued).total_seconds())
        if idle is not None and idle[0] == event.process_epoch:
            self.metrics.dispatch.observe((started - max(queued, idle[1])).total_seconds())

    def _ended(self, event: Event, status: str, count: bool) -> None:
        assert event.turn_id is not None
        self._queued_at.pop(event.turn_id, None)
        started = self._running_at.pop(event.turn_id, None)
        if event.process_epoch is not None and started is not None:
            # Its runner lets go of it and asks for the next one.
            self._idle_since[event.session_id] = (event.process_epoch, event.created_at)
        if not count:
            return
        reason = _data(event, "reason")
        self.metrics.turns_finished.labels(status, str(reason or NO_REASON)).inc()
        if started is not None:
            self.metrics.turn_duration.labels(status).observe(
                (event.created_at - started).total_seconds()
            )

    def _resumed(self, event: Event, count: bool) -> None:
        hold_id = _data(event, "holdId")
        self._release(event.session_id, hold_id if isinstance(hold_id, str) else None, count=count)
        idle = self._idle_since.get(event.session_id)
        if idle is not None:
            # A held runner gets no Turn: its wait for one starts again now.
            self._idle_since[event.session_id] = (idle[0], event.created_at)
