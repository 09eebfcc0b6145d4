"""A Session's limits, resolved from its resources: its own override, else its Actor's."""

from __future__ import annotations

from datetime import timedelta

from helmr.control import SessionLimits
from helmr.protocol.api import LimitsView
from helmr.resources import Actor, EffectiveLimits, RetrySpec, Session


def effective_limits(session: Session | None, actor: Actor) -> SessionLimits:
    """The limits ``session`` runs under, read once when it opens (``session`` is
    None for one the API opened whose resource is not created yet: it has no
    overrides). An Actor changed later does not change them."""
    spec = actor.spec
    turn_seconds = session and session.spec.max_turn_duration_seconds
    idle_seconds = session and session.spec.idle_timeout_seconds
    return SessionLimits(
        queue_limit=spec.queue_limit,
        max_turn_duration=_seconds(turn_seconds or spec.max_turn_duration_seconds),
        max_run_duration=_seconds(spec.max_duration_seconds),
        idle_ttl=_seconds(spec.ttl_seconds),
        idle_timeout_seconds=idle_seconds or spec.idle_timeout_seconds,
        retry_max_attempts=spec.retry.max_attempts,
        retry_backoff=timedelta(seconds=spec.retry.backoff_seconds),
    )


def _seconds(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def limits_status(limits: LimitsView | None) -> EffectiveLimits | None:
    """The Session status's ``limits``: what :func:`effective_limits` resolved."""
    if limits is None:
        return None
    return EffectiveLimits(
        queue_limit=limits.queue_limit,
        max_turn_duration_seconds=_whole_seconds(limits.max_turn_duration),
        max_duration_seconds=_whole_seconds(limits.max_run_duration),
        ttl_seconds=_whole_seconds(limits.idle_ttl),
        idle_timeout_seconds=limits.idle_timeout_seconds,
        retry=RetrySpec(
            max_attempts=limits.retry_max_attempts,
            backoff_seconds=_whole_seconds(limits.retry_backoff) or 0,
        ),
    )


def _whole_seconds(value: timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())
