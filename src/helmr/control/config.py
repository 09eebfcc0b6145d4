"""The limits the state machine applies (the Environment's settings)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class ControlConfig:
    max_process_failures: int = 3
    """Consecutive process failures that hold a Session (spec: three)."""
    max_execution_losses: int = 3
    """Consecutive execution losses (evictions, node loss) that fail a Session.

    The spec says only that "repeated infrastructure loss terminates the
    Session"; losses never count as process failures.
    """
    stop_grace: timedelta = timedelta(seconds=10)
    """How long a process has to let go of a Turn interrupted on it (its next
    ``receive``, or its end) before it is stopped (``stop_deadline_elapsed``) and
    that counts as a process failure (spec: work that "cannot be stopped cleanly")."""
    max_save_attempts: int = 5
    """Attempts to take one save of the Computer disk before it is given up
    (``failed``); a failed attempt is retried, never the Turn that asked for it."""
    preparation_timeout: timedelta = timedelta(minutes=5)
    """How long a new runner process may take to be running (its pod scheduled, its
    image pulled, its container started) before its preparation counts as failed."""
    preparation_attempts: int = 3
    """Failed preparations that fail a Session whose limits were never resolved
    (a resolved Session uses its Actor's ``retry.maxAttempts``)."""
    preparation_backoff: timedelta = timedelta(seconds=5)
    """The first wait after a failed preparation, likewise (``retry.backoffSeconds``)."""
