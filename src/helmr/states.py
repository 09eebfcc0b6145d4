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

TerminalTurnStatus = Literal["completed", "failed", "interrupted", "cancelled"]
"""A Turn that has ended; it never runs again (each has its ``turn.<status>`` event)."""
TurnStatus = Literal["queued", "running", TerminalTurnStatus]
TERMINAL_TURN_STATUSES: frozenset[TurnStatus] = frozenset(get_args(TerminalTurnStatus))


class TurnSource(enum.StrEnum):
    """Who admitted a Turn (its ``source``); a Turn resource may name a source of its own."""

    API = "api"
    """The REST API's enqueue."""
    SEND = "send"
    """A send while no Turn was active, admitted as a Turn of its own."""
    KUBERNETES = "kubernetes"
    """A Turn resource applied with kubectl that names no source."""


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


class StopReason(enum.StrEnum):
    """Why a Session's live runner process must stop (the Session's ``stop_reason``),
    and the ``session.process_stopped`` reason once it has."""

    CLOSE = "close"
    CANCEL = "cancel"
    IDLE = "idle"
    """The three ways a Session closes (``CloseHow``): its process stops with it."""
    SESSION_FAILED = "session_failed"
    TURN_DEADLINE_ELAPSED = "turn_deadline_elapsed"
    """Its Turn ran past ``maxTurnDuration``: that Turn is interrupted, the next runs
    on a new process."""
    STOP_DEADLINE_ELAPSED = "stop_deadline_elapsed"
    """It did not let go of an interrupted Turn within the stop grace period: stopped
    by force, and that end counts as a process failure."""
    RUN_DURATION_ELAPSED = "run_duration_elapsed"
    """Its Run lasted ``maxDurationSeconds``: a stop, not a failure; queued Turns
    continue in a new Run."""
    STORAGE_EXHAUSTED = "storage_exhausted"
    """Its Computer disk reached ``stopAt`` while a Turn ran."""
    CODE_CHANGED = "code_changed"
    """Its actor's files changed (``helmr dev``): it is replaced between two Turns,
    never during one; the next Turn runs the new code."""
    EXITED = "exited"
    """Nothing asked it to stop: it ended by itself (a ``process_stopped`` reason only)."""


class InterruptReason(enum.StrEnum):
    """Why a Turn ended ``interrupted`` (its ``turn.interrupted`` reason); a process
    failure's own reason may stand there too."""

    INTERRUPT = "interrupt"
    """An explicit interrupt: its hold lasts until resume."""
    CANCEL = "cancel"
    SESSION_FAILED = "session_failed"
    TURN_DEADLINE_ELAPSED = StopReason.TURN_DEADLINE_ELAPSED.value
    STOP_DEADLINE_ELAPSED = StopReason.STOP_DEADLINE_ELAPSED.value
    STORAGE_EXHAUSTED = StopReason.STORAGE_EXHAUSTED.value
    COMPUTER_EXECUTION_LOST = "computer_execution_lost"
    """Its runner was lost with the Computer it ran on (spec/002)."""
    PROCESS_FAILED = "process_failed"
    """Its process ended while it ran, and nothing more precise is known."""
    PREPARATION_FAILED = "preparation_failed"
    """Its process never got to run (also the ``session.process_failed`` reason)."""


class FailureReason(enum.StrEnum):
    """Why a Session failed (its ``failure_reason``); some are followed by ``: detail``."""

    EXECUTION_LOST = "execution_lost"
    ACTOR_INIT_FAILED = "actor_init_failed"
    """Its runner could not load the actor."""
    PREPARATION_EXHAUSTED = "preparation_exhausted"
    """Every preparation its Actor's ``retry`` allows failed."""
    ACTOR_NOT_FOUND = "actor_not_found"
    RESTORE_FAILED = "restore_failed"
    """Its Computer disk's save is gone or unusable."""
    NAMESPACE_TERMINATING = "namespace_terminating"
    """Its namespace is being deleted, or is gone: no runner can start there again."""
    HISTORY_LOST = "history_lost"
    """The store lost its history (also the error code of its Turns)."""

    def because(self, detail: object) -> str:
        """The reason with what it is about: ``restore_failed: <why>``."""
        return f"{self.value}: {detail}"


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
