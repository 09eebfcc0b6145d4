"""The Session timeline's vocabulary: event kinds, records, pages, ids and content.

Every output and lifecycle fact of a Session is one :class:`Event` with a
per-session ``sequence`` shared by all kinds (spec: Session events). Lifecycle
events get a deterministic id (:func:`lifecycle_event_id`) so that emitting
the same fact twice, e.g. after a crash between a side effect and its record,
stores it once. ``turn.output`` data is always a list of Content fragments
(:func:`normalize_content`).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    with_config,
)

# pydantic needs typing_extensions' TypedDict before Python 3.12.
from typing_extensions import TypedDict

from helmr.states import TerminalTurnStatus


class SessionEventKind(StrEnum):
    """Every event kind of spec/002, plus ``session.execution_lost`` (spec/001)."""

    TURN_QUEUED = "turn.queued"
    TURN_RUNNING = "turn.running"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    TURN_INTERRUPTED = "turn.interrupted"
    TURN_CANCELLED = "turn.cancelled"
    TURN_OUTPUT = "turn.output"
    MESSAGE_ADMITTED = "message.admitted"
    MESSAGE_STARTED = "message.started"
    MESSAGE_DELIVERED = "message.delivered"
    MESSAGE_REJECTED = "message.rejected"
    ASK_CREATED = "ask.created"
    ASK_ANSWERED = "ask.answered"
    ASK_CANCELLED = "ask.cancelled"
    SESSION_INTERRUPT = "session.interrupt"
    SESSION_RESUME = "session.resume"
    SESSION_CLOSE = "session.close"
    SESSION_CLOSED = "session.closed"
    SESSION_PROCESS_STOPPED = "session.process_stopped"
    SESSION_PROCESS_FAILED = "session.process_failed"
    SESSION_EXECUTION_LOST = "session.execution_lost"
    SESSION_RECOVERY_GAP = "session.recovery_gap"
    SESSION_STORAGE_PRESSURE = "session.storage_pressure"
    SLACK_DELIVERY_UNAVAILABLE = "slack.delivery_unavailable"


TURN_ENDINGS: dict[SessionEventKind, TerminalTurnStatus] = {
    SessionEventKind.TURN_COMPLETED: "completed",
    SessionEventKind.TURN_FAILED: "failed",
    SessionEventKind.TURN_INTERRUPTED: "interrupted",
    SessionEventKind.TURN_CANCELLED: "cancelled",
}
"""The events that end a Turn, each with the status it leaves the Turn in."""
TURN_ENDED: dict[TerminalTurnStatus, SessionEventKind] = {
    status: kind for kind, status in TURN_ENDINGS.items()
}
"""The event that records a Turn's terminal status."""


class SessionEvent(BaseModel):
    """One record of a Session timeline.

    ``process_epoch`` is the Run provenance: the process epoch the fact belongs
    to (the runner that wrote the output, ran or lost the turn), null for facts
    no process produced (admission, controls).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    session_id: str
    turn_id: str | None
    sequence: int
    created_at: datetime
    kind: SessionEventKind
    data: JsonValue
    process_epoch: int | None = None


class SessionEventPage(BaseModel):
    """A finite page of a timeline; not a completion signal.

    ``next_after`` is the cursor to pass as ``after`` next time (the last
    record's sequence, or the given ``after`` when the page is empty).
    ``retained_after`` is the retention boundary: sequences up to it are gone,
    so a cursor below it has missed history.
    """

    model_config = ConfigDict(frozen=True)

    records: list[SessionEvent]
    next_after: int
    has_more: bool
    retained_after: int


# The spec's names (spec/002: "The SDK exports SessionEvent, SessionEventKind and
# SessionEventPage") are the classes' own; Helmr's code uses these shorter ones.
EventKind = SessionEventKind
Event = SessionEvent
EventPage = SessionEventPage


def lifecycle_event_id(session_id: str, kind: EventKind, subject: str | int | None = None) -> str:
    """The deterministic id of a lifecycle fact: ``<session>:<kind>[:<subject>]``.

    ``subject`` is what the fact is about and happens at most once for: a turn
    id, a message id, a hold id or a process epoch. Facts that happen once per
    Session (``session.close``, ``session.closed``) have none.
    """
    if subject is None:
        return f"{session_id}:{kind}"
    return f"{session_id}:{kind}:{subject}"


@with_config(ConfigDict(extra="forbid"))
class TextFragment(TypedDict):
    type: Literal["text"]
    text: str


@with_config(ConfigDict(extra="forbid"))
class JsonFragment(TypedDict):
    type: Literal["json"]
    json: JsonValue


Content: TypeAlias = Annotated[TextFragment | JsonFragment, Field(discriminator="type")]

_CONTENT_LIST: TypeAdapter[list[Content]] = TypeAdapter(list[Content])


def normalize_content(value: JsonValue) -> list[Content]:
    """The ``turn.output`` data for a written value.

    A string is text; a non-empty list of valid fragments is already content
    and passes through; any other JSON (including an empty list, which would
    be an output event with nothing in it) is wrapped as one json fragment.
    """
    if isinstance(value, str):
        return [TextFragment(type="text", text=value)]
    if isinstance(value, list) and value:
        try:
            return _CONTENT_LIST.validate_python(value, strict=True)
        except ValidationError:
            pass
    return [JsonFragment(type="json", json=value)]
