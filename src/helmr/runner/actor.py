"""An Actor definition: the ``run`` function and the settings Helmr runs it with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helmr.actor_limits import IDLE_TIMEOUT, MAX_DURATION, QUEUE, RETRY, TTL
from helmr.errors import InvalidInput
from helmr.protocol import ActorSettings

if TYPE_CHECKING:
    from helmr.runner.session import Session

Run = Callable[["Session"], Awaitable[None]]


DEFAULT_IDLE_TIMEOUT = 300.0
"""The warm wait of a runner process when neither the control plane (the Session or
Actor manifest) nor ``actor(idle_timeout=...)`` gives one."""


@dataclass(frozen=True)
class Actor:
    """What ``actor(...)`` returns; ``HELMR_ENTRYPOINT`` names one (``module:attr``).

    Each setting is the ``Actor`` manifest field of the same meaning, in whole
    seconds (or turns, attempts). The manifest wins where both say something;
    what the manifest leaves unset the control plane takes from here, when the
    Session's first Run that declares it reports it on its first ``receive``
    (docs/semantics.md, "The Actor's limits").
    """

    id: str
    run: Run
    idle_timeout: int | None = None
    """``idleTimeoutSeconds``: seconds a runner process waits warm for the next turn
    before Helmr suspends it, unless the Session or Actor manifest sets one; unset
    everywhere: ``DEFAULT_IDLE_TIMEOUT``. Also ``receive``'s default."""
    queue: int | None = None
    """``queueLimit``: the most turns a session may hold queued."""
    max_duration: int | None = None
    """``maxDurationSeconds``: seconds one Run (one runner process) may execute; past
    it the Run ends once its current turn settles, and the next turn starts a new
    Run. Not a per-turn deadline (that is the manifest's ``maxTurnDurationSeconds``)."""
    ttl: int | None = None
    """``ttlSeconds``: seconds an open Session may stay idle before it closes
    (``closed_how: idle``)."""
    retry: int | None = None
    """``retry.maxAttempts``: attempts to prepare and start a runner process before
    the session fails (preparation exhaustion)."""

    def settings(self) -> ActorSettings | None:
        """What the runner reports to the control plane; None when nothing is set."""
        declared = ActorSettings(
            queue=self.queue,
            max_duration=self.max_duration,
            ttl=self.ttl,
            retry=self.retry,
            idle_timeout=self.idle_timeout,
        )
        return None if declared == ActorSettings() else declared


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
    """Defines an actor: ``run(session)`` is an async function that receives and settles turns.

    A setting the control plane cannot honour (not a whole number within its
    ``Actor`` manifest field's range) raises ``InvalidInput`` naming it.
    """
    if not id:
        raise InvalidInput("actor(id=...): give the declared actor id")
    if not callable(run):
        raise InvalidInput(f"actor(run=...): {run!r} is not an async function")
    settings = {
        "idle_timeout": (idle_timeout, IDLE_TIMEOUT),
        "queue": (queue, QUEUE),
        "max_duration": (max_duration, MAX_DURATION),
        "ttl": (ttl, TTL),
        "retry": (retry, RETRY),
    }
    whole: dict[str, int | None] = {}
    for name, (value, limit) in settings.items():
        if value is not None and (why := limit.refusal(value)) is not None:
            raise InvalidInput(f"actor({name}={value!r}): {why}", setting=name)
        whole[name] = None if value is None else int(value)
    return Actor(id=id, run=run, **whole)
