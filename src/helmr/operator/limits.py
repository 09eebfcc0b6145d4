"""A Session's effective limits: its own override, else its Actor's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from helmr.resources import Actor, Session


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_turn_duration: timedelta | None
    """How long a Turn may run (None: no limit); Control stores it per process."""
    idle_timeout_seconds: int
    """The runner's warm wait for the next Turn before it may be suspended."""


def effective_limits(session: Session, actor: Actor) -> SessionLimits:
    """The limits a new process of ``session`` runs under, read when it starts, so
    that a change to the Actor applies from the Session's next process on."""
    turn_seconds = session.spec.max_turn_duration_seconds or actor.spec.max_turn_duration_seconds
    return SessionLimits(
        max_turn_duration=None if turn_seconds is None else timedelta(seconds=turn_seconds),
        idle_timeout_seconds=session.spec.idle_timeout_seconds or actor.spec.idle_timeout_seconds,
    )
