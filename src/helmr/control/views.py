"""What :class:`helmr.control.Control` returns: read-only pydantic models.

Field names are the REST API's snake case; the server serializes them as is.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from helmr.protocol import ErrorInfo
from helmr.store import (
    TERMINAL_TURN_STATUSES,
    CloseHow,
    HoldRow,
    HoldScope,
    MessageRow,
    MessageStatus,
    ReadTx,
    SessionRow,
    SessionStatus,
    TurnRow,
    TurnStatus,
    sessions,
    turns,
)


class _NoResult(Enum):
    NO_RESULT = "NO_RESULT"


NoResult = Literal[_NoResult.NO_RESULT]
NO_RESULT: Final = _NoResult.NO_RESULT
"""``complete(result=NO_RESULT)`` completes without a result, unlike ``result=None`` (JSON null)."""


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class HoldView(_View):
    hold_id: str
    reason: str
    """``interrupt`` or ``process_failures``."""
    scope: HoldScope
    """``session``: held until resumed; ``turn``: an exact-Turn interrupt, held only
    until the interrupted processing has stopped."""
    turn_id: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: HoldRow) -> HoldView:
        return cls(
            hold_id=row.id,
            reason=row.reason,
            scope=row.scope,
            turn_id=row.turn_id,
            created_at=row.created_at,
        )


class SessionView(_View):
    id: str
    namespace: str
    name: str
    actor: str
    workspace: str
    key: str | None
    status: SessionStatus
    hold: HoldView | None
    consecutive_failures: int
    process_epoch: int
    process_live: bool
    active_turn_id: str | None
    queued_turns: int
    cancel_requested_at: datetime | None
    closed_how: CloseHow | None
    """Set once ``status`` is ``closed``."""
    closed_at: datetime | None
    failure_reason: str | None
    """Why a ``failed`` Session was terminated (e.g. ``execution_lost``)."""
    max_turn_duration: timedelta | None
    created_at: datetime
    retained_after: int

    @classmethod
    def of(cls, row: SessionRow, *, queued_turns: int) -> SessionView:
        return cls(
            id=row.id,
            namespace=row.namespace,
            name=row.name,
            actor=row.actor,
            workspace=row.workspace,
            key=row.key,
            status=row.status,
            hold=None if row.hold is None else HoldView.of(row.hold),
            consecutive_failures=row.consecutive_failures,
            process_epoch=row.process_epoch,
            process_live=row.process_live,
            active_turn_id=row.active_turn_id,
            queued_turns=queued_turns,
            cancel_requested_at=row.cancel_requested_at,
            closed_how=row.close_how if row.status == "closed" else None,
            closed_at=row.closed_at,
            failure_reason=row.failure_reason,
            max_turn_duration=row.max_turn_duration,
            created_at=row.created_at,
            retained_after=row.retained_after,
        )


class TurnView(_View):
    """A Turn's identity, status and (until retention expires them) payloads.

    ``has_result`` distinguishes "completed without a result" (False) from a
    JSON null result (True, ``result`` None). After the retention period
    ``payload_expired`` is True and ``input``, ``result`` and ``response`` are
    None while identity, status, timestamps and flags remain.
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
    error: ErrorInfo | None
    reason: str | None
    """Why a Turn ended ``interrupted`` or ``cancelled`` (e.g. ``interrupt``,
    ``turn_deadline_elapsed``, ``process_failed``, ``computer_execution_lost``)."""
    source: str
    idempotency_key: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    epoch: int | None
    """The process epoch the Turn ran on."""
    deadline_at: datetime | None
    settling: bool
    messages_ready: bool
    payload_expired: bool

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TURN_STATUSES

    @classmethod
    def of(cls, row: TurnRow) -> TurnView:
        return cls(
            id=row.id,
            session_id=row.session_id,
            sequence=row.sequence,
            status=row.status,
            input=row.input,
            has_result=row.has_result,
            result=row.result,
            has_response=row.has_response,
            response=row.response,
            error=None if row.error is None else ErrorInfo.model_validate(row.error),
            reason=row.reason,
            source=row.source,
            idempotency_key=row.idempotency_key,
            created_at=row.created_at,
            started_at=row.started_at,
            ended_at=row.ended_at,
            epoch=row.epoch,
            deadline_at=row.deadline_at,
            settling=row.settling is not None,
            messages_ready=row.messages_ready_at is not None,
            payload_expired=row.payload_expired,
        )


class MessageView(_View):
    id: str
    session_id: str
    turn_id: str
    data: JsonValue
    status: MessageStatus
    reason: str | None
    created_at: datetime
    payload_expired: bool

    @classmethod
    def of(cls, row: MessageRow) -> MessageView:
        return cls(
            id=row.id,
            session_id=row.session_id,
            turn_id=row.turn_id,
            data=row.data,
            status=row.status,
            reason=row.reason,
            created_at=row.created_at,
            payload_expired=row.payload_expired,
        )


class SendResult(_View):
    """``kind="messaged"``: ``message`` went to the active ``turn``; ``"enqueued"``:
    the Session was idle and ``turn`` is a new queued Turn carrying the data."""

    kind: Literal["enqueued", "messaged"]
    turn: TurnView
    message: MessageView | None


class StopReceipt(_View):
    """An accepted interrupt; the process may still be converging."""

    session_id: str
    hold_id: str
    scope: HoldScope
    turn_id: str | None
    """The Turn that was interrupted, if one was running."""
    accepted_at: datetime


class ProcessStop(_View):
    """A runner process the operator must stop (a stop, not a failure)."""

    session_id: str
    epoch: int
    reason: str
    """``turn_deadline_elapsed``, ``close``, ``idle``, ``cancel`` or ``session_failed``."""


ProcessEnd = Literal["stopped", "failed", "lost", "ignored"]


class ProcessOutcome(_View):
    """What a reported process end meant.

    ``ignored``: the epoch was not the Session's live process (a repeat or a
    stale report). ``hold_id`` is set when this failure held the Session.
    """

    session_id: str
    epoch: int
    outcome: ProcessEnd
    hold_id: str | None
    session_status: SessionStatus


def load_session(rt: ReadTx, session_id: str) -> SessionView:
    return SessionView.of(
        sessions.require(rt, session_id), queued_turns=turns.count_queued(rt, session_id)
    )
