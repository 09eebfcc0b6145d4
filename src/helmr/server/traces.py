"""What the API tells a Turn's trace that no timeline event records: when a request
to admit it arrived, and when its runner asked to settle it.

The operator's ``helmr.operator.telemetry.turn_traces`` listens when tracing is on; by
default nothing does. Both are told with the time the request arrived.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from helmr.protocol.api import TurnView


class TurnTraceFacts(Protocol):
    def admitted(self, turn: TurnView, requested_at: datetime) -> None:
        """``turn`` was returned by an admission requested at ``requested_at`` (a
        repeated idempotency key returns one admitted earlier: not this request's)."""

    def settling(self, session_id: str, turn_id: str, requested_at: datetime) -> None:
        """The runner asked to settle the Turn (``complete`` or ``fail``)."""


class NoTraces:
    def admitted(self, turn: TurnView, requested_at: datetime) -> None:
        return None

    def settling(self, session_id: str, turn_id: str, requested_at: datetime) -> None:
        return None
