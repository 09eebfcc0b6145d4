"""JSON bodies of the runner routes, one model per request and reply.

Requests forbid unknown fields, so a misspelt field fails loudly at the server
instead of vanishing. Replies ignore unknown fields, so a runner image built
against an older Helmr keeps working when the control plane adds some.
Durations are seconds (JSON numbers). Values written by actors are any JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

from helmr.states import ErrorInfo


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ReceiveRequest(_Request):
    """``POST receive``: long-poll for the next turn of this session."""

    timeout: float = Field(gt=0, description="How long this request may wait for a turn.")
    idle_timeout: float | None = Field(
        default=None,
        gt=0,
        description="The actor's warm wait: idle this long, the session may be suspended.",
    )


class TurnAssignment(_Reply):
    """``receive`` reply: the turn this process is to run now."""

    id: str
    sequence: int = Field(ge=1)
    input: JsonValue
    source: JsonValue = None
    created_at: datetime


class SessionClosed(_Reply):
    """``receive`` reply once a closing session has drained: there is no next turn."""

    closed: Literal[True] = True


ReceiveReply = TurnAssignment | SessionClosed
_RECEIVE_REPLY: TypeAdapter[ReceiveReply] = TypeAdapter(ReceiveReply)


def parse_receive_reply(data: Any) -> ReceiveReply:
    """The ``receive`` reply in ``data`` (a decoded JSON body)."""
    return _RECEIVE_REPLY.validate_python(data)


class OutputRequest(_Request):
    """``POST output`` (session-level) and ``POST turns/{tid}/output``: append output.

    The key is required: the runner makes one per write when the actor gives
    none, so a write retried after a lost reply is recorded once.
    """

    value: JsonValue
    idempotency_key: str = Field(min_length=1, max_length=256)


class RespondRequest(_Request):
    """``POST turns/{tid}/respond``: set the turn's human-facing response."""

    value: JsonValue


class CompleteRequest(_Request):
    """``POST turns/{tid}/complete``: settle the turn as completed.

    ``{}`` completes without a result; ``{"result": null}`` records JSON null.
    Build the first as ``CompleteRequest()`` and the second as
    ``CompleteRequest(result=None)``; send with ``exclude_unset=True``.
    """

    result: JsonValue = None

    @property
    def has_result(self) -> bool:
        return "result" in self.model_fields_set


class FailRequest(_Request):
    """``POST turns/{tid}/fail``: settle the turn as failed."""

    error: ErrorInfo


class NextMessageRequest(_Request):
    """``POST turns/{tid}/messages/next``: long-poll for the turn's next message."""

    timeout: float = Field(gt=0, description="How long this request may wait for a message.")


class Message(_Reply):
    """A message sent to a turn: its id and the application-defined ``data``."""

    id: str
    data: JsonValue


class NextMessageReply(_Reply):
    """``messages/next`` reply: the next message, or ``null`` when the poll timed out."""

    message: Message | None = None


class StopsRequest(_Request):
    """``POST stops``: long-poll for a stop of the turns this process holds."""

    turn_ids: list[str] = Field(
        min_length=1, max_length=16, description="The turns this process holds unsettled."
    )
    timeout: float = Field(gt=0, description="How long this request may wait for a stop.")


class StopsReply(_Reply):
    """``stops`` reply: the turns to stop now (a stop of them was accepted, or they
    ended elsewhere); empty when the poll timed out."""

    turn_ids: list[str] = Field(default_factory=list)


class StorageReport(_Request):
    """``POST storage``: how full this process's Computer disk is now."""

    used_bytes: int = Field(ge=0, description="Bytes used on the Computer disk.")


class MessageOutcomeRequest(_Request):
    """Body of every message outcome (``MessageOutcome`` is the path's last segment);
    ``reason`` explains ``rejected`` and ``unknown``."""

    reason: str | None = None


class Ack(_Reply):
    """The reply of every runner call that has nothing else to say."""

    ok: Literal[True] = True
