"""Helmr's vocabulary: the statuses, scopes and reasons every layer speaks.

The one definition of each: the store keeps these values in its rows (its SQL
CHECK constraints are generated from them), the REST views and the runner
protocol send them, the custom resources mirror them, and Control decides
between them. It sits at the bottom of the import graph and needs only the
standard library: the runner imports it (``helmr.constraints``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

from helmr.constraints import Constraint

SessionStatus = Literal["open", "closing", "closed", "failed"]
ENDED_SESSION_STATUSES: frozenset[SessionStatus] = frozenset({"closed", "failed"})
"""A Session in one of these admits nothing and has nothing left to cancel."""

TurnStatus = Literal["queued", "running", "completed", "failed", "interrupted", "cancelled"]
TERMINAL_TURN_STATUSES: frozenset[TurnStatus] = frozenset(
    {"completed", "failed", "interrupted", "cancelled"}
)

Outcome = Literal["completed", "failed"]
"""How a runner settles a Turn (``complete`` or ``fail``)."""

MessageStatus = Literal["admitted", "started", "delivered", "rejected", "unknown"]


class MessageOutcome(enum.StrEnum):
    """What a runner reports of a message's handler; each is also a ``MessageStatus``.

    ``started`` just before the handler runs, then exactly one of ``delivered``
    (it returned), ``rejected`` (it refused the message) or ``unknown`` (it
    failed unexpectedly).
    """

    STARTED = "started"
    DELIVERED = "delivered"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


HoldScope = Literal["session", "turn"]
"""What a hold's interrupt named: the ``session``, or one running ``turn``. Both hold
the whole Session until ``resume(hold_id)`` (explicit interruption requires resume)."""
HoldReason = Literal["interrupt", "process_failures", "recovery_gap", "storage_pressure"]

StoragePressureState = Literal["paused", "stopped", "resolved"]
"""What an episode of Computer disk pressure became (``session.storage_pressure``):
``paused`` (usage reached ``pauseAt``: queued Turns wait), ``stopped`` (usage reached
``stopAt`` while a Turn ran: it was interrupted) or ``resolved`` (usage fell below
``resolveAt``: the episode ended)."""

EpisodeState = Literal["paused", "stopped"]
"""The state of an episode that has not resolved yet (the store's ``storage.state``)."""

CloseHow = Literal["close", "cancel", "idle"]
"""How a Session closed: drained after ``close``, cancelled, or closed when idle."""


class _NoResult(enum.Enum):
    NO_RESULT = "NO_RESULT"


NoResult = Literal[_NoResult.NO_RESULT]
NO_RESULT: Final = _NoResult.NO_RESULT
"""``complete(result=NO_RESULT)`` completes without a result, unlike ``result=None`` (JSON null)."""


def values(vocabulary: object) -> tuple[str, ...]:
    """The values of a ``Literal`` vocabulary above, in order (for SQL and schemas)."""
    return get_args(vocabulary)


# The Turn CRD's limits on status.error (helmr.resources.turn.TurnError).
ERROR_CODE_MAX = 128
ERROR_MESSAGE_MAX = 32_768
_TRUNCATED = "… [{} more characters]"


def _bounded(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    # The marker counts against the limit (sized for the longest count it could
    # show), so the recorded text fits the CRD.
    keep = limit - len(_TRUNCATED.format(len(value)))
    return value[:keep] + _TRUNCATED.format(len(value) - keep)


@dataclass(frozen=True)
class ErrorInfo:
    """A Turn's failure: a stable machine ``code`` and a message for people.

    Both are cut to the Turn CRD's limits where the failure is recorded (a
    runner's ``fail``, an older row read back), with a marker saying how much
    was cut, so a long stack trace can never make the mirrored status invalid.
    Unknown fields are ignored: a client parsing a newer server's Turn, or a
    server an older runner's failure, keeps working. A dataclass, not a pydantic
    model: the runner builds it (``FailRequest``); pydantic validates it elsewhere.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "ignore"}

    code: Annotated[str, Constraint(min_length=1)]
    message: str

    def __post_init__(self) -> None:
        # Runs on construction and after pydantic's validation alike.
        object.__setattr__(self, "code", _bounded(self.code, ERROR_CODE_MAX))
        object.__setattr__(self, "message", _bounded(self.message, ERROR_MESSAGE_MAX))

    @classmethod
    def from_json(cls, data: Any) -> ErrorInfo:
        """The failure in a decoded JSON object (a stored row); other fields are ignored."""
        return cls(code=str(data["code"]), message=str(data["message"]))


SaveStatus = Literal["pending", "ready", "failed", "lost", "pruned", "covered"]
"""A Computer disk save: ``pending`` (requested, not ready yet), ``ready`` (a
committed Computer version), ``failed`` (its retries ran out), ``lost`` (its disk
was lost before it was ready), ``pruned`` (deleted by the keep-last-N policy) or
``covered`` (never taken itself: a newer save of the same disk was taken in its
place, and holds its state once that one is ready)."""
