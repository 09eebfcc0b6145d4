"""The ranges and defaults of an Actor's limits, in one place for their three
spellings: the ``Actor`` manifest (``helmr.resources.actor``), the settings an
actor's code declares (``actor(...)``, ``helmr.runner.actor``) and the runner's
report of those settings to the control plane (``helmr.protocol.models``).

A setting the manifest leaves unset is taken from the code; one neither sets
gets the default below (docs/semantics.md, "The Actor's limits"). Standard
library only: the runner imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """One limit: the manifest field it is, and its whole-number range."""

    field: str
    """The ``Actor`` manifest's field (``spec.<field>``)."""
    low: int
    high: int
    unit: str = "seconds"

    def refusal(self, value: object) -> str | None:
        """Why ``value`` is not in range (a whole number, not a bool), or None if it is."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not self.low <= value <= self.high  # NaN and infinities too
            or value % 1
        ):
            return f"give whole {self.unit} from {self.low} to {self.high} (spec.{self.field})"
        return None


QUEUE = Limit("queueLimit", 1, 10_000, "turns")
IDLE_TIMEOUT = Limit("idleTimeoutSeconds", 1, 86_400)
MAX_TURN_DURATION = Limit("maxTurnDurationSeconds", 1, 604_800)
MAX_DURATION = Limit("maxDurationSeconds", 1, 2_592_000)
TTL = Limit("ttlSeconds", 1, 31_536_000)
RETRY = Limit("retry.maxAttempts", 1, 10, "attempts")

DEFAULT_QUEUE_LIMIT = 100
"""``queueLimit`` when neither the manifest nor the code sets one."""
DEFAULT_RETRY_ATTEMPTS = 3
"""``retry.maxAttempts`` when neither the manifest nor the code sets one."""
