"""An Actor definition: the ``run`` function and the settings Helmr runs it with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helmr.errors import InvalidInput

if TYPE_CHECKING:
    from helmr.runner.session import Session

Run = Callable[["Session"], Awaitable[None]]


DEFAULT_IDLE_TIMEOUT = 300.0
"""The warm wait of a runner process when neither the control plane (the Session or
Actor manifest) nor ``actor(idle_timeout=...)`` gives one."""


@dataclass(frozen=True)
class Actor:
    """What ``actor(...)`` returns; ``HELMR_ENTRYPOINT`` names one (``module:attr``).

    The settings mirror the ``Actor`` manifest, which is what the control plane
    enforces; the runner itself uses ``idle_timeout`` as ``receive``'s default.
    """

    id: str
    run: Run
    idle_timeout: float | None = None
    """Seconds a runner process waits warm for the next turn before Helmr suspends it,
    unless the Actor manifest or the Session sets ``idleTimeoutSeconds``; unset
    everywhere: ``DEFAULT_IDLE_TIMEOUT``."""
    queue: int | None = None
    """The queue limit: the most turns a session may hold queued."""
    max_duration: float | None = None
    """Seconds one Run (one runner process) may execute before Helmr stops it."""
    ttl: float | None = None
    """Seconds an open Session may stay idle before it closes (``closed_how: idle``)."""
    retry: int | None = None
    """Attempts to prepare and start a runner process before the session fails."""


def actor(
    *,
    id: str,
    run: Run,
    idle_timeout: float | None = None,
    queue: int | None = None,
    max_duration: float | None = None,
    ttl: float | None = None,
    retry: int | None = None,
) -> Actor:
    """Defines an actor: ``run(session)`` is an async function that receives and settles turns."""
    if not id:
        raise InvalidInput("actor(id=...): give the declared actor id")
    if not callable(run):
        raise InvalidInput(f"actor(run=...): {run!r} is not an async function")
    positive = {
        "idle_timeout": idle_timeout,
        "max_duration": max_duration,
        "queue": queue,
        "retry": retry,
    }
    for name, value in positive.items():
        if value is not None and value <= 0:
            raise InvalidInput(f"actor({name}=...): give a positive number")
    if ttl is not None and ttl < 0:
        raise InvalidInput("actor(ttl=...): give zero or more seconds")
    return Actor(
        id=id,
        run=run,
        idle_timeout=idle_timeout,
        queue=queue,
        max_duration=max_duration,
        ttl=ttl,
        retry=retry,
    )
