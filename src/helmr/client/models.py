"""What the client returns: the REST API's snake-case views as pydantic models.

The client talks HTTP only and cannot import the control plane, so these read
the wire format of ``docs/api.md``. They ignore fields they do not know, so a
client keeps working against a newer server. Events and pages are
``helmr.events``' own models.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

SessionStatus = Literal["open", "closing", "closed", "failed"]
TurnStatus = Literal["queued", "running", "completed", "failed", "interrupted", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "interrupted", "cancelled"})


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Hold(_View):
    hold_id: str
    reason: str
    """``interrupt`` or ``process_failures``."""
    scope: Literal["session", "turn"]
    turn_id: str | None
    created_at: datetime


class Session(_View):
    """A session's state; poll it for ``status == "closed"`` after cancel or close."""

    id: str
    namespace: str
    name: str
    actor: str
    workspace: str
    key: str | None
    status: SessionStatus
    hold: Hold | None
    consecutive_failures: int
    process_epoch: int
    process_live: bool
    active_turn_id: str | None
    queued_turns: int
    cancel_requested_at: datetime | None
    closed_how: Literal["close", "cancel", "idle"] | None
    closed_at: datetime | None
    failure_reason: str | None = None
    """Why a ``failed`` session failed."""
    max_turn_duration: timedelta | None
    created_at: datetime
    retained_after: int


class TurnError(_View):
    code: str
    message: str


class Turn(_View):
    """A turn's status and outcome.

    ``has_result`` tells "completed without a result" from a JSON null result.
    After retention ``payload_expired`` is true and the payloads are null.
    ``timeout`` is true when ``wait`` returned because its timeout elapsed:
    that ends the wait, not the turn.
    """

    id: str
    session_id: str
    sequence: int
    status: TurnStatus
    input: JsonValue
    has_result: bool
    result: JsonValue
    has_response: bool
    response: JsonValue
    error: TurnError | None
    reason: str | None
    source: str
    idempotency_key: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    epoch: int | None
    settling: bool
    payload_expired: bool
    timeout: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class Message(_View):
    """A message receipt: accepted for that exact turn, not proof of handling."""

    id: str
    session_id: str
    turn_id: str
    data: JsonValue
    status: Literal["admitted", "started", "delivered", "rejected", "unknown"]
    reason: str | None
    created_at: datetime
    payload_expired: bool


class StopReceipt(_View):
    """An accepted interrupt; the process may still be converging. Resume with ``hold_id``."""

    session_id: str
    hold_id: str
    scope: Literal["session", "turn"]
    turn_id: str | None
    accepted_at: datetime


class Run(_View):
    """The session's current execution: one runner process."""

    process_epoch: int


class _SendReply(_View):
    kind: Literal["enqueued", "messaged"]
    turn: Turn
    message: Message | None


class _StartReply(_View):
    session: Session
    run: Run | None
