"""The Session/Turn state machine over the timeline store (plain async code, no Kubernetes).

Control has a side for each caller, each a small typed surface: ``PublicControl``
(the REST API), ``RunnerControl`` (the runner API), ``OperatorControl`` (the
operator; the only one whose writes the leader's term fences), the first and last
sharing the Session verbs (``SessionControls``). ``ApiControl`` is the two APIs'
and ``Control`` all of them (:mod:`helmr.control.control`). Each caller imports
its side from its module (import-linter holds each to it); this package gives the
views and names every side shares. Every method is
``async`` and each control is one store transaction, so
a state change commits together with the events that record it. Its methods
are the transaction functions of these modules, whose docstrings are the
reference (``help(Control.enqueue)`` shows them):

- ``sessions``: open, interrupt, resume, cancel, close, fail (the public side);
- ``turns``: enqueue, the runner's receive (``take_next``), output, respond,
  complete and fail;
- ``messages``: send, and the runner's message readiness and reports
  (``report_message`` with a ``helmr.states.MessageOutcome``);
- ``processes``: the operator's side (process started, exited, lost; deadlines);
- ``preparation``: a new process until it runs (failed preparations, retries);
- ``limits``: a Session's limits, resolved once from its Actor, and its idle expiry;
- ``disks``: the Computer disk's saves and restores, and the Workspace that holds it;
- ``storage_pressure``: Computer disk pressure episodes, from the runner's usage reports;
- ``lifecycle``: the transitions those share; ``guards`` their preconditions;
  ``stops`` whether a running Turn's stop (interrupt, cancel) is pending.

Errors are ``helmr.errors`` classes. Timeouts are seconds; a long poll's
timeout shapes its answer, it does not cancel anything. The views returned
are the REST API's models (``helmr.protocol.api``); ``ProcessStop`` and
``ProcessOutcome`` are the operator's. The events each control records, and
their data: docs/architecture.md.
"""

from helmr.control.config import ControlConfig
from helmr.control.record import REPORTED_KINDS
from helmr.control.views import ProcessOutcome, ProcessStop, SessionCounts, SessionName
from helmr.protocol.api import (
    HoldView,
    MessageView,
    SendResult,
    SessionView,
    StopReceipt,
    TurnView,
)
from helmr.states import NO_RESULT, NoResult
from helmr.store import SessionLimits, StorageLimits

__all__ = [
    "NO_RESULT",
    "REPORTED_KINDS",
    "ControlConfig",
    "HoldView",
    "MessageView",
    "NoResult",
    "ProcessOutcome",
    "ProcessStop",
    "SendResult",
    "SessionCounts",
    "SessionLimits",
    "SessionName",
    "SessionView",
    "StopReceipt",
    "StorageLimits",
    "TurnView",
]
