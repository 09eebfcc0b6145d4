"""Every error Helmr raises on purpose, on every side of the wire.

The tree, which the REST API maps to status codes and ``code`` strings::

    HelmrError                  500 internal           never raised for bad input
    ├── InvalidInput            400 invalid_input      a request field is wrong
    │   ├── MethodNotAllowed    405 method_not_allowed
    │   └── UnsupportedMediaType 415 unsupported_media_type  a body that is not JSON
    ├── Unauthenticated         401 unauthenticated    no or unknown bearer token
    ├── Forbidden               403 forbidden          no access to the namespace
    ├── NotFound                404 not_found          unknown session, turn, hold
    ├── HistoryUnavailable      410 history_unavailable  a stream's cursor is below retention
    ├── ReceiveTimeout          408 receive_timeout    receive() saw no turn in time
    ├── Conflict                409 conflict           does not fit the current state
    │   ├── SessionHeld         409 session_held       send() to a held session
    │   ├── SessionNotOpen      409 session_not_open   admission to a closing session
    │   ├── TurnNotActive       409 turn_not_active    exact-turn send, turn not active
    │   ├── TurnSettling        409 turn_settling      send while the turn settles
    │   ├── HoldMismatch        409 hold_mismatch      resume with another holdId
    │   ├── HoldNotConverged    409 hold_not_converged resume before the interrupted Turn stopped
    │   ├── StaleEpoch          409 stale_epoch        a runner call from a fenced epoch
    │   └── SaveNotReady        409 save_not_ready     a fork of a Turn whose save is not ready
    ├── PayloadTooLarge         413 payload_too_large
    ├── QueueFull               429 queue_full         the Session's queueLimit is reached
    ├── Unavailable             503 unavailable        the control plane cannot answer now
    │   └── NotReady            503 not_ready          /readyz: not serving yet
    └── MessageRejected         409 message_rejected   a handler's known rejection

Each carries a stable machine ``code`` and a message that says what to do.
A client rebuilds the error a server sent by its code (``from_json``); the
body's shape is ``ErrorBody``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from helmr.constraints import Constraint

__all__ = [
    "UNAVAILABLE_STATUSES",
    "Conflict",
    "ErrorBody",
    "ErrorDetail",
    "Forbidden",
    "HelmrError",
    "HistoryUnavailable",
    "HoldMismatch",
    "HoldNotConverged",
    "InvalidInput",
    "MessageRejected",
    "MethodNotAllowed",
    "NotFound",
    "NotReady",
    "PayloadTooLarge",
    "QueueFull",
    "ReceiveTimeout",
    "SessionHeld",
    "SessionNotOpen",
    "StaleEpoch",
    "TurnNotActive",
    "TurnSettling",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "from_json",
]


class HelmrError(Exception):
    """Base of every Helmr error."""

    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return {"error": body}


class InvalidInput(HelmrError):
    code = "invalid_input"
    status = 400


class MethodNotAllowed(InvalidInput):
    code = "method_not_allowed"
    status = 405


class UnsupportedMediaType(InvalidInput):
    code = "unsupported_media_type"
    status = 415


class Unauthenticated(HelmrError):
    code = "unauthenticated"
    status = 401


class Forbidden(HelmrError):
    code = "forbidden"
    status = 403


class NotFound(HelmrError):
    code = "not_found"
    status = 404


class HistoryUnavailable(HelmrError):
    """Records a reader asked for are gone: its cursor (``after``) is below the
    Session's retention boundary (``retained_after``), so the records between them
    were removed by history retention. Raised by the client's events stream, which
    never skips history silently; follow on from ``retained_after`` to read what
    is retained."""

    code = "history_unavailable"
    status = 410

    @property
    def after(self) -> int:
        """The cursor the reader was at."""
        return int(self.details["after"])

    @property
    def retained_after(self) -> int:
        """The retention boundary: the records after it are retained."""
        return int(self.details["retained_after"])


class ReceiveTimeout(HelmrError):
    code = "receive_timeout"
    status = 408


class Conflict(HelmrError):
    code = "conflict"
    status = 409


class SessionHeld(Conflict):
    code = "session_held"


class SessionNotOpen(Conflict):
    code = "session_not_open"


class TurnNotActive(Conflict):
    code = "turn_not_active"


class TurnSettling(Conflict):
    code = "turn_settling"


class HoldMismatch(Conflict):
    code = "hold_mismatch"


class HoldNotConverged(Conflict):
    """The hold's interrupted Turn is still stopping: its process has not let go of it
    yet. Resume once the Turn shows ``interrupted`` (or the hold ``converged``)."""

    code = "hold_not_converged"


class StaleEpoch(Conflict):
    code = "stale_epoch"


class SaveNotReady(Conflict):
    """A fork of a Turn whose save is taken but not ready yet: fork again once it is
    (``details``: ``save``, ``status``); a fork is never made from an older save."""

    code = "save_not_ready"


class PayloadTooLarge(HelmrError):
    code = "payload_too_large"
    status = 413


class QueueFull(HelmrError):
    """The Session already holds its ``queueLimit`` of queued Turns; admit again
    once some have started (``details``: ``queueLimit``, ``queued``)."""

    code = "queue_full"
    status = 429


class Unavailable(HelmrError):
    """The control plane cannot answer now (e.g. a proxy's 502/503/504 while it
    restarts); a call that is safe to repeat may be retried."""

    code = "unavailable"
    status = 503


UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
"""The HTTP statuses that mean ``Unavailable``, whoever answered them."""


class NotReady(Unavailable):
    """The server runs but cannot serve requests yet (``/readyz``)."""

    code = "not_ready"


class MessageRejected(HelmrError):
    """Raised by an actor's message handler for a known rejection of a message."""

    code = "message_rejected"
    status = 409


# Dataclasses, documented by pydantic in the OpenAPI document: the runner imports
# this module, and it starts without pydantic (helmr.constraints).


@dataclass(frozen=True)
class ErrorDetail:
    code: Annotated[str, Constraint(description="Stable machine code, e.g. `turn_not_active`.")]
    message: Annotated[str, Constraint(description="What went wrong and what to do.")]
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class ErrorBody:
    """Every error response's body: what ``HelmrError.to_json`` writes."""

    error: ErrorDetail


_BY_CODE: dict[str, type[HelmrError]] = {}


def _index(cls: type[HelmrError]) -> None:
    _BY_CODE[cls.code] = cls
    for sub in cls.__subclasses__():
        _index(sub)


_index(HelmrError)


def from_json(status: int, body: dict[str, Any]) -> HelmrError:
    """Rebuild the error a server sent (``{"error": {"code", "message"}}``)."""
    err = body.get("error", {}) if isinstance(body, dict) else {}
    code = str(err.get("code", "internal"))
    message = str(err.get("message", f"HTTP {status}"))
    cls = _BY_CODE.get(code, HelmrError)
    return cls(message, **dict(err.get("details") or {}))
