"""JSON bodies of the runner routes, one dataclass per request and reply.

Plain dataclasses, so that the runner builds and reads them without pydantic
(its cold start pays for every import); the server validates and documents
the same classes with pydantic (``helmr.constraints`` carries their field
constraints there). The runner sends a request as ``to_json(body)`` and reads
a reply with the reply's ``from_json``.

Requests forbid unknown fields, so a misspelt field fails loudly at the server
instead of vanishing. Replies ignore unknown fields, so a runner image built
against an older Helmr keeps working when the control plane adds some.
Durations are seconds (JSON numbers). Values written by actors are any JSON
(``Any`` here: the server reads them from a JSON body, and the runner checks
an actor's value when it encodes it, ``helmr.runner.wire``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from helmr.actor_limits import IDLE_TIMEOUT, MAX_DURATION, QUEUE, RETRY, TTL, Limit
from helmr.constraints import NO_NUL, Constraint
from helmr.states import NO_RESULT, ErrorInfo


class _Request:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}


class _Reply:
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "ignore"}


_SINCE = "helmr_protocol_since"


def since(revision: int) -> dict[str, int]:
    """The metadata of a request field that protocol ``revision`` added
    (``contract.ENV_PROTOCOL``; its default is None): left out of the JSON while it
    is None, so a request that uses nothing new is exactly the older revision's
    (whose server forbids unknown fields)."""
    return {_SINCE: revision}


def to_json(body: object) -> dict[str, Any]:
    """A request as the JSON object it is sent as; a field left ``NO_RESULT``, or a
    later revision's field left None (:func:`since`), is left out."""
    return {
        f.name: _plain(value)
        for f in fields(body)  # type: ignore[arg-type]
        if (value := getattr(body, f.name)) is not NO_RESULT
        and not (value is None and _SINCE in f.metadata)
    }


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return to_json(value) if is_dataclass(value) else value


def _in(limit: Limit, description: str) -> Constraint:
    return Constraint(ge=limit.low, le=limit.high, description=description)


@dataclass(frozen=True)
class ActorSettings(_Request):
    """What the actor's code declared (``actor(...)``), each as the ``Actor`` manifest
    field of the same meaning; None: the code left it unset."""

    queue: Annotated[int | None, _in(QUEUE, "`queueLimit`.")] = None
    max_duration: Annotated[int | None, _in(MAX_DURATION, "`maxDurationSeconds`.")] = None
    ttl: Annotated[int | None, _in(TTL, "`ttlSeconds`.")] = None
    retry: Annotated[int | None, _in(RETRY, "`retry.maxAttempts`.")] = None
    idle_timeout: Annotated[int | None, _in(IDLE_TIMEOUT, "`idleTimeoutSeconds`.")] = None


MAX_METADATA_KEYS = 64
MAX_TAGS = 32
MAX_TAG_LENGTH = 128


@dataclass(frozen=True)
class ReceiveRequest(_Request):
    """``POST receive``: long-poll for the next turn of this session."""

    timeout: Annotated[
        float, Constraint(gt=0, description="How long this request may wait for a turn.")
    ]
    idle_timeout: Annotated[
        float | None,
        Constraint(
            gt=0, description="The actor's warm wait: idle this long, the session may be suspended."
        ),
    ] = None
    metadata: Annotated[
        dict[str, Any] | None,
        Constraint(
            max_length=MAX_METADATA_KEYS,
            description=(
                "Application-defined JSON object recorded on the `turn.running` event of"
                " the turn this receive starts (revision 2)."
            ),
        ),
    ] = field(default=None, metadata=since(2))
    tags: Annotated[
        list[Annotated[str, Constraint(min_length=1, max_length=MAX_TAG_LENGTH)]] | None,
        Constraint(
            max_length=MAX_TAGS,
            description=(
                "Application-defined tags recorded on the `turn.running` event of the turn"
                " this receive starts (revision 2)."
            ),
        ),
    ] = field(default=None, metadata=since(2))
    actor_settings: Annotated[
        ActorSettings | None,
        Constraint(
            description=(
                "What the actor's code declared, sent on the process's first receive: the"
                " control plane takes each setting the Session's limits leave unset"
                " (revision 2)."
            )
        ),
    ] = field(default=None, metadata=since(2))
    start: Annotated[
        bool | None,
        Constraint(
            description=(
                "False: answer only the turn already started for this process, start"
                " none, now or later, for it and wait for none (revision 6): an ending"
                " process's last look, so that it gives back what it was given and"
                " takes nothing new."
            )
        ),
    ] = field(default=None, metadata=since(6))


@dataclass(frozen=True)
class NextReceive(_Request):
    """A settlement's ``next`` (revision 3): the runner's next ``receive``, asked with
    the settlement so that a runner makes one request per turn. The reply's ``next``
    is the turn started for this process (with these labels on its ``turn.running``),
    ``{"closed": true}``, or null when there is none (the runner then sends a
    ``receive``). Without ``timeout`` it never waits. With it (revision 5), a
    settlement that finds no turn to start waits for one as a ``receive`` would: the
    reply's head (status 200) is sent once the settlement has committed, its body
    when a turn starts, the process gets no more, or ``timeout`` passes (null)."""

    metadata: Annotated[
        dict[str, Any] | None,
        Constraint(max_length=MAX_METADATA_KEYS, description="As `receive`'s `metadata`."),
    ] = None
    tags: Annotated[
        list[Annotated[str, Constraint(min_length=1, max_length=MAX_TAG_LENGTH)]] | None,
        Constraint(max_length=MAX_TAGS, description="As `receive`'s `tags`."),
    ] = None
    timeout: Annotated[
        float | None,
        Constraint(
            gt=0,
            description=(
                "Wait up to this long for a turn, as `receive`'s `timeout`, once the"
                " settlement has committed (revision 5)."
            ),
        ),
    ] = field(default=None, metadata=since(5))


@dataclass(frozen=True)
class TurnAssignment(_Reply):
    """``receive`` reply: the turn this process is to run now."""

    id: str
    sequence: Annotated[int, Constraint(ge=1)]
    input: Any
    created_at: datetime
    source: Any = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnAssignment:
        return cls(
            id=data["id"],
            sequence=data["sequence"],
            input=data["input"],
            created_at=datetime.fromisoformat(data["created_at"]),
            source=data.get("source"),
        )


@dataclass(frozen=True)
class SessionClosed(_Reply):
    """``receive`` reply once a closing session has drained: there is no next turn."""

    closed: Literal[True] = True


ReceiveReply = TurnAssignment | SessionClosed


def parse_receive_reply(data: Mapping[str, Any]) -> ReceiveReply:
    """The ``receive`` reply in ``data`` (a decoded JSON body)."""
    return SessionClosed() if data.get("closed") is True else TurnAssignment.from_json(data)


def _parse_next(data: Mapping[str, Any] | None) -> ReceiveReply | None:
    return None if data is None else parse_receive_reply(data)


@dataclass(frozen=True)
class OutputRequest(_Request):
    """``POST output`` (session-level) and ``POST turns/{tid}/output``: append output.

    The key is required: the runner makes one per write when the actor gives
    none, so a write retried after a lost reply is recorded once.
    """

    value: Any
    idempotency_key: Annotated[str, Constraint(min_length=1, max_length=256, pattern=NO_NUL)]


MAX_OUTPUT_BATCH = 64


@dataclass(frozen=True)
class OutputBatchRequest(_Request):
    """``POST output/batch`` and ``POST turns/{tid}/output/batch`` (revision 3): the
    writes an actor made in one burst, appended in order in one transaction (all or
    none), each deduplicated by its key as ``output`` is."""

    items: Annotated[list[OutputRequest], Constraint(min_length=1, max_length=MAX_OUTPUT_BATCH)]


@dataclass(frozen=True)
class RespondRequest(_Request):
    """``POST turns/{tid}/respond``: set the turn's human-facing response."""

    value: Any


def _no_result() -> Any:
    return NO_RESULT


@dataclass(frozen=True)
class CompleteRequest(_Request):
    """``POST turns/{tid}/complete``: settle the turn as completed.

    ``{}`` completes without a result; ``{"result": null}`` records JSON null.
    Build the first as ``CompleteRequest()`` and the second as
    ``CompleteRequest(result=None)``.
    """

    # A factory, not a default: the schema then shows no default (NO_RESULT is not JSON).
    result: Any = field(default_factory=_no_result)
    next: Annotated[
        NextReceive | None,
        Constraint(description="Start this process's next turn now too (revision 3)."),
    ] = field(default=None, metadata=since(3))

    @property
    def has_result(self) -> bool:
        return self.result is not NO_RESULT


@dataclass(frozen=True)
class FailRequest(_Request):
    """``POST turns/{tid}/fail``: settle the turn as failed."""

    error: ErrorInfo
    next: Annotated[
        NextReceive | None,
        Constraint(description="Start this process's next turn now too (revision 3)."),
    ] = field(default=None, metadata=since(3))


@dataclass(frozen=True)
class Settled(_Reply):
    """``complete`` and ``fail`` reply. ``next`` answers the request's ``next``
    (revision 3; an older runner reads ``{"ok": true}`` and ignores it)."""

    ok: Literal[True] = True
    next: TurnAssignment | SessionClosed | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Settled:
        return cls(next=_parse_next(data.get("next")))


@dataclass(frozen=True)
class NextMessageRequest(_Request):
    """``POST turns/{tid}/messages/next``: long-poll for the turn's next message."""

    timeout: Annotated[
        float, Constraint(gt=0, description="How long this request may wait for a message.")
    ]


@dataclass(frozen=True)
class Message(_Reply):
    """A message sent to a turn: its id and the application-defined ``data``."""

    id: str
    data: Any


@dataclass(frozen=True)
class NextMessageReply(_Reply):
    """``messages/next`` reply: the next message, or ``null`` when the poll timed out."""

    message: Message | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NextMessageReply:
        message = data.get("message")
        return cls(None if message is None else Message(id=message["id"], data=message["data"]))


@dataclass(frozen=True)
class StopsRequest(_Request):
    """``POST stops``: long-poll for a stop of the turns this process holds."""

    turn_ids: Annotated[
        list[Annotated[str, Constraint(pattern=NO_NUL)]],
        Constraint(
            min_length=1, max_length=16, description="The turns this process holds unsettled."
        ),
    ]
    timeout: Annotated[
        float, Constraint(gt=0, description="How long this request may wait for a stop.")
    ]


@dataclass(frozen=True)
class StopsReply(_Reply):
    """``stops`` reply: the turns to stop now (a stop of them was accepted, or they
    ended elsewhere; the turn the process runs now may be among them unlisted); empty
    when the poll timed out."""

    turn_ids: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StopsReply:
        return cls(turn_ids=list(data.get("turn_ids") or ()))


@dataclass(frozen=True)
class StorageReport(_Request):
    """``POST storage``: how full this process's Computer disk is now."""

    used_bytes: Annotated[int, Constraint(ge=0, description="Bytes used on the Computer disk.")]


@dataclass(frozen=True)
class MessageOutcomeRequest(_Request):
    """Body of every message outcome (``MessageOutcome`` is the path's last segment);
    ``reason`` explains ``rejected`` and ``unknown``."""

    reason: Annotated[str, Constraint(pattern=NO_NUL)] | None = None


@dataclass(frozen=True)
class Ack(_Reply):
    """The reply of every runner call that has nothing else to say."""

    ok: Literal[True] = True


@dataclass(frozen=True)
class AdoptionRequest(_Request):
    """``POST adoption`` (revision 4): a pooled runner long-polls for the Session that
    adopts it. Its token is its pod's; no process epoch is fenced yet (send 0)."""

    timeout: Annotated[
        float, Constraint(gt=0, description="How long this request may wait for an adoption.")
    ]


@dataclass(frozen=True)
class AdoptionReply(_Reply):
    """``adoption`` reply: the Session this runner now runs, as a cold runner's
    environment would have said (``HELMR_SESSION_ID``, ``HELMR_PROCESS_EPOCH``,
    ``HELMR_IDLE_TIMEOUT``), and the Session's own settings (``spec.env`` and
    ``spec.envFrom``, Secret keys resolved), which the runner puts in its environment."""

    session_id: str
    namespace: str
    epoch: int
    idle_timeout: float | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AdoptionReply:
        idle = data.get("idle_timeout")
        return cls(
            session_id=str(data["session_id"]),
            namespace=str(data["namespace"]),
            epoch=int(data["epoch"]),
            idle_timeout=None if idle is None else float(idle),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        )
