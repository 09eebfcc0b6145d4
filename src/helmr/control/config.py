"""The limits the state machine applies (the Environment's settings)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ControlConfig:
    max_process_failures: int = 3
    """Consecutive process failures that hold a Session (spec: three)."""
    max_execution_losses: int = 3
    """Consecutive execution losses (evictions, node loss) that fail a Session.

    The spec says only that "repeated infrastructure loss terminates the
    Session"; losses never count as process failures.
    """
