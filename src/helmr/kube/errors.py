"""What the apiserver answers when it refuses or fails a call, as Helmr's own errors.

The Kubernetes client raises one ``ApiException`` for every answer that is not a
success; each call through :mod:`helmr.kube` raises one of these instead, by the
answer's HTTP status (as kopf does with its own ``APIError`` tree), so code above
this package catches ``NotFound`` or ``Conflict`` by name and never imports the
client. Each keeps what the apiserver's ``Status`` says: its message for people
(an admission policy's refusal, say) and its details (the object, the causes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

P = ParamSpec("P")
T = TypeVar("T")


class KubeError(Exception):
    """An answer of the apiserver that is no success (``status`` its HTTP code)."""

    status = 0

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        reason: str = "",
        details: dict[str, Any] | None = None,
        body: str = "",
    ) -> None:
        super().__init__(message or reason)
        if status is not None:
            self.status = status
        self.reason = reason
        """The answer's HTTP reason phrase (``Not Found``, ``Conflict``, ...)."""
        self.message = message or reason
        """The apiserver's own words, which say why (an admission policy's refusal)."""
        self.details = details or {}
        """The Status's details: the object's kind and name, the causes."""
        self.body = body
        """The answer's body as it came."""


class BadRequest(KubeError):
    status = 400


class Unauthorized(KubeError):
    """The control plane's own credentials were not accepted."""

    status = 401


class Forbidden(KubeError):
    """Refused: by RBAC, or by admission (a policy, a webhook, a terminating namespace)."""

    status = 403


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    """An object of that name exists already, or was changed since it was read."""

    status = 409


class Gone(KubeError):
    status = 410


class Invalid(KubeError):
    """The object fails the schema or a validation rule (the Status names the fields)."""

    status = 422


class TooManyRequests(KubeError):
    status = 429


class ServerError(KubeError):
    """The apiserver failed (5xx), or its answer was cut short."""


_BY_STATUS: dict[int, type[KubeError]] = {
    kind.status: kind
    for kind in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        Gone,
        Invalid,
        TooManyRequests,
    )
}


def translated(error: ApiException) -> KubeError:
    """The error that ``error`` (the client's) is, its Status read once."""
    status = int(error.status or 0)
    body = error.body if isinstance(error.body, str) else ""
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    details = parsed.get("details")
    kind = _BY_STATUS.get(status, ServerError if status >= 500 or status == 0 else KubeError)
    return kind(
        str(parsed.get("message") or error.reason or ""),
        status=status,
        reason=str(error.reason or ""),
        details=details if isinstance(details, dict) else {},
        body=body,
    )


def translating(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn``, raising :class:`KubeError` where the client raises ``ApiException``."""

    # Here, not at the top: the client is imported by what calls it (helmr.kube.client).
    from kubernetes.client.exceptions import ApiException

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except ApiException as e:
            raise translated(e) from e

    return call
