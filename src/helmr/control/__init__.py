"""The Session/Turn state machine over the timeline store (plain async code, no Kubernetes).

``Control(store: Store, config: ControlConfig | None = None)``. Every method is
``async``; each control is one store transaction (run on the store's writer
thread), so a state change commits together with the events that record it.
Errors are ``helmr.errors`` classes. Timeouts are seconds; a long poll's
timeout shapes its answer, it does not cancel anything. The views it returns
are the REST API's models (``helmr.protocol.api``), which the server sends as
they are; ``ProcessStop`` and ``ProcessOutcome`` are the operator's.

Public side (the REST API)::

    open_session(*, namespace, name, actor, workspace, key=None, idempotency_key=None,
                 max_turn_duration: timedelta | None = None) -> SessionView
        # same (namespace, idempotency_key) -> same Session; Conflict if the
        # Workspace is owned by another Session that is not closed (or whose
        # process is still live)
    get_session(session_id) -> SessionView                      # NotFound
    enqueue(session_id, input, *, idempotency_key=None, source="api") -> TurnView
        # FIFO; open Sessions only (held is fine), else SessionNotOpen; a known
        # key returns its Turn whatever the Session's state
    get_turn(session_id, turn_id) -> TurnView
    wait_turn(session_id, turn_id, timeout) -> TurnView         # terminal, or as is at timeout
    send(session_id, data, turn_id=None) -> SendResult
        # kind "messaged" (active Turn before settlement, even before its handler
        # is ready) or "enqueued" (idle: a new Turn, source "send").
        # SessionNotOpen (closed/failed/cancelled, or closing when it would
        # enqueue), SessionHeld, TurnNotActive (exact Turn not running),
        # TurnSettling, NotFound
    interrupt(session_id, turn_id=None) -> StopReceipt
        # the running Turn ends interrupted (reason "interrupt"); queued work stays.
        # Session scope (no turn_id): hold until resume(hold_id); interrupting a
        # Session already held returns its hold. Exact Turn (turn_id, must be
        # running, else TurnNotActive): a "turn"-scoped hold that ends by itself
        # (session.resume {holdId, how: "converged"}) once the processing has
        # stopped: the runner's next receive, or its process ending.
        # Either way the process has ControlConfig.stop_grace to let go of the
        # interrupted Turn (its next receive, or its end); past that it is
        # stopped (expire_deadlines: stop_deadline_elapsed), a process failure.
    resume(session_id, hold_id) -> SessionView
        # releases exactly that hold (HoldMismatch otherwise; repeating the resume
        # of a released hold is accepted while not held again); never replays;
        # a process_failures hold also resets the failure count
    cancel(session_id) -> SessionView
        # cancel_requested_at set, status closing, queued -> cancelled, active ->
        # interrupted (reason "cancel"); the process is asked to stop at once;
        # closed (how "cancel") once it is gone; repeats are no-ops; escalates
        # closing; SessionNotOpen if ended
    close(session_id, *, how: "close" | "idle" = "close") -> SessionView
        # no new admission; drains the FIFO, then closed once the process is gone.
        # An idle close records only session.closed. how="idle" (the operator's
        # idle expiry) is Conflict when work exists.
    list_events(session_id, after=0, limit=100) -> EventPage   # InvalidInput on bad after/limit
    wait_events(session_id, after=0, timeout=30.0, limit=100) -> EventPage  # waits for a record

Runner side (every call: StaleEpoch unless ``epoch`` is the live process)::

    receive(session_id, epoch, timeout) -> TurnView | None
        # the FIFO head, now running (turn.running, started_at, deadline_at); the
        # active unsettled Turn again on a repeat; None when this process gets no
        # more Turns (closing Session drained, or its stop was requested);
        # ReceiveTimeout after timeout
    output(session_id, epoch, turn_id | None, value, idempotency_key=None) -> Event
        # turn.output with normalized content; same key -> the first event;
        # allowed while the Turn settles (started callbacks may still write)
    respond(session_id, epoch, turn_id, value) -> TurnView       # TurnSettling while settling
    complete(session_id, epoch, turn_id, result=NO_RESULT) -> TurnView  # None = JSON null
    fail(session_id, epoch, turn_id, error: helmr.protocol.ErrorInfo) -> TurnView
        # both start settlement: new sends get TurnSettling, messages whose
        # handler never started get message.rejected (reason "turn_settling"),
        # and the outcome commits once no started handler is pending (at once
        # usually). Repeating the settling call returns the Turn.
    messages_ready(session_id, epoch, turn_id) -> TurnView
    next_message(session_id, epoch, turn_id, timeout) -> MessageView | None
        # oldest message not yet started (again until it is); None at timeout;
        # TurnSettling while settling, TurnNotActive once the Turn ended
    message_started | message_delivered(session_id, epoch, turn_id, message_id) -> MessageView
    message_rejected | message_unknown(session_id, epoch, turn_id, message_id,
                                       reason=None) -> MessageView
        # repeats are no-ops; "unknown" records no event (neither delivery nor
        # rejection)

Operator side::

    process_started(session_id, *, max_turn_duration=None) -> int   # the new epoch
        # Conflict while the previous process is live; SessionNotOpen if ended
    process_exited(session_id, epoch, exit_code, *, failure=None) -> ProcessOutcome
        # failure: the operator's verdict and reason (e.g. "stop_deadline_elapsed");
        # a process stopped for stop_deadline_elapsed failed with that reason
        # however it ended (execution_lost too); else it failed if it exited
        # nonzero unasked or left a Turn running.
        # A failure interrupts the running Turn (reason "process_failed"),
        # records session.process_failed and counts; the third consecutive one
        # holds the Session (process_failures). ExitCode.INIT_FAILED fails the
        # Session. A stop records session.process_stopped. Other epochs: "ignored".
    execution_lost(session_id, epoch, *, computer_version=None, computer_id=None)
        -> ProcessOutcome
        # not counted; turn.interrupted (computer_execution_lost) and
        # session.execution_lost; ControlConfig.max_execution_losses consecutive
        # losses fail the Session; after a requested stop it is that stop
    expire_deadlines(now) -> list[ProcessStop]
        # running Turns past deadline_at -> interrupted (turn_deadline_elapsed);
        # their processes must stop (a stop, not a failure). Live processes past
        # stop_deadline_at (an interrupted Turn not let go of within stop_grace,
        # and no other stop asked) must stop too: stop_deadline_elapsed, whose
        # end is a counted process failure
    next_deadline() -> datetime | None    # the earliest of both kinds
    processes_to_stop() -> list[ProcessStop]     # every stop asked for and not yet done
    live_processes() -> list[SessionView]
    changed_sessions(timeout) -> set[str]        # change feed, one consumer
    sessions_needing_runner() -> list[SessionView]   # queued work, no hold, no live process
    fail_session(session_id, reason) -> SessionView
    record_event(session_id, kind, data, *, subject, turn_id=None, process_epoch=None) -> Event
        # operator-observed facts only (REPORTED_KINDS), once per subject
    expire_history(now) -> helmr.store.Expired   # the store's retention period

The events each control records, and their data: docs/architecture.md.
"""

from helmr.control.config import ControlConfig
from helmr.control.control import REPORTED_KINDS, Control
from helmr.control.views import NO_RESULT, NoResult, ProcessOutcome, ProcessStop
from helmr.protocol.api import (
    HoldView,
    MessageView,
    SendResult,
    SessionView,
    StopReceipt,
    TurnView,
)

__all__ = [
    "NO_RESULT",
    "REPORTED_KINDS",
    "Control",
    "ControlConfig",
    "HoldView",
    "MessageView",
    "NoResult",
    "ProcessOutcome",
    "ProcessStop",
    "SendResult",
    "SessionView",
    "StopReceipt",
    "TurnView",
]
