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

from prometheus_client.registry import Collector

from helmr.events import TURN_ENDINGS, Event, EventKind
from helmr.operator.telemetry.collectors import counter, histogram
from helmr.states import HoldReason

# Histogram buckets (seconds), each spanning what its quantity plausibly takes.
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
_DISPATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600, 14400)
_COLD_START_BUCKETS = (0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120, 300)

# Events that name the Session's hold (holdId) and the reason of a hold they open.
# One naming a hold the Session already has (storage pressure on a held Session)
# opens none, except a recovery gap naming a storage pressure hold: that hold is
# the gap's now (helmr.control.processes), released for the one reason and
# opened for the other.
_HOLDING: dict[EventKind, HoldReason] = {
    EventKind.SESSION_INTERRUPT: "interrupt",
    EventKind.SESSION_PROCESS_FAILED: "process_failures",
    EventKind.SESSION_RECOVERY_GAP: "recovery_gap",
    EventKind.SESSION_STORAGE_PRESSURE: "storage_pressure",
}
_BECOMES_GAPS: tuple[HoldReason, HoldReason] = ("storage_pressure", "recovery_gap")
# A storage pressure episode that resolved released its hold (if still open).
_STORAGE_RESOLVED = "resolved"
NO_REASON = "none"


def _data(event: Event, key: str) -> object:
    return event.data.get(key) if isinstance(event.data, dict) else None


class TimelineMetrics:
    def __init__(self) -> None:
        self.turns_finished = counter(
            "helmr_turns_finished",
            "Turns that reached a terminal status, by status and reason (the interrupt's or "
            "cancel's reason; none for completed and failed Turns).",
            ["status", "reason"],
        )
        self.queue_wait = histogram(
            "helmr_turn_queue_wait_seconds",
            "From a Turn's admission (turn.queued) to it running (turn.running).",
            _WAIT_BUCKETS,
        )
        self.dispatch = histogram(
            "helmr_turn_dispatch_seconds",
            "From the moment a Turn and an idle runner both exist (the later of the Turn's "
            "admission, the runner connecting, its previous Turn ending, a hold released) "
            "to the Turn running.",
            _DISPATCH_BUCKETS,
        )
        self.turn_duration = histogram(
            "helmr_turn_duration_seconds",
            "From a Turn running to its terminal status, by that status.",
            _TURN_BUCKETS,
            ["status"],
        )
        self.process_failures = counter(
            "helmr_process_failures",
            "Runner process failures (session.process_failed), by reason.",
            ["reason"],
        )
        self.holds_opened = counter(
            "helmr_holds_opened",
            "Holds put on Sessions, by reason (interrupt, process_failures, recovery_gap).",
            ["reason"],
        )
        self.holds_released = counter(
            "helmr_holds_released",
            "Holds released (resumed, or their Session ended), by the hold's reason.",
            ["reason"],
        )
        self.cold_start = histogram(
            "helmr_runner_cold_start_seconds",
            "From a runner pod created to its runner's first receive (the runner connected).",
            _COLD_START_BUCKETS,
        )
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
            self.cold_start.observe((at - pod[1]).total_seconds())

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
        elif event.kind in TURN_ENDINGS and event.turn_id is not None:
            self._ended(event, TURN_ENDINGS[event.kind], count)
        elif event.kind == EventKind.SESSION_RESUME:
            self._resumed(event, count)
        if event.kind == EventKind.SESSION_PROCESS_FAILED and count:
            self.process_failures.labels(str(_data(event, "reason"))).inc()
        hold_id = _data(event, "holdId")
        if event.kind in _HOLDING and isinstance(hold_id, str):
            if _data(event, "state") == _STORAGE_RESOLVED:
                # The episode releases only a hold that is still its own.
                self._release(event.session_id, hold_id, count=count, reason="storage_pressure")
            else:
                self._held(event.session_id, hold_id, _HOLDING[event.kind], count)

    def _held(self, session_id: str, hold_id: str, reason: HoldReason, count: bool) -> None:
        held = self._holds.get(session_id)
        if held is not None and held[0] == hold_id and (held[1], reason) != _BECOMES_GAPS:
            return  # the hold the Session already has
        # A Session has one hold at a time: one it had is gone (an interrupt
        # replaces a storage pressure hold).
        self._release(session_id, None, count=count)
        self._holds[session_id] = (hold_id, reason, count)
        if count:
            self.holds_opened.labels(reason).inc()

    def _release(
        self,
        session_id: str,
        hold_id: str | None,
        *,
        count: bool,
        reason: HoldReason | None = None,
    ) -> None:
        """Releases the Session's hold (``hold_id``, or whichever it has; only if it
        holds for ``reason``, when given); counted if its opening was."""
        held = self._holds.get(session_id)
        if held is None or (hold_id is not None and held[0] != hold_id):
            return
        if reason is not None and held[1] != reason:
            return
        del self._holds[session_id]
        if count and held[2]:
            self.holds_released.labels(held[1]).inc()

    def _running(self, event: Event, count: bool) -> None:
        assert event.turn_id is not None
        started = event.created_at
        self._running_at[event.turn_id] = started
        queued = self._queued_at.pop(event.turn_id, None)
        idle = self._idle_since.pop(event.session_id, None)
        if queued is None or not count:
            return
        self.queue_wait.observe((started - queued).total_seconds())
        if idle is not None and idle[0] == event.process_epoch:
            self.dispatch.observe((started - max(queued, idle[1])).total_seconds())

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
        self.turns_finished.labels(status, str(reason or NO_REASON)).inc()
        if started is not None:
            self.turn_duration.labels(status).observe((event.created_at - started).total_seconds())

    def _resumed(self, event: Event, count: bool) -> None:
        hold_id = _data(event, "holdId")
        self._release(event.session_id, hold_id if isinstance(hold_id, str) else None, count=count)
        idle = self._idle_since.get(event.session_id)
        if idle is not None:
            # A held runner gets no Turn: its wait for one starts again now.
            self._idle_since[event.session_id] = (idle[0], event.created_at)

    @property
    def collectors(self) -> list[Collector]:
        return [
            self.turns_finished,
            self.queue_wait,
            self.dispatch,
            self.turn_duration,
            self.process_failures,
            self.holds_opened,
            self.holds_released,
            self.cold_start,
        ]
