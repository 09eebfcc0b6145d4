"""A Session's limits: resolved once from its Actor, then enforced by the store.

The operator resolves them (the Session's override, else its Actor's) on the
Session's first supervisor pass after it opened, whichever way it opened
(API or kubectl), and stores them here; from then on they are the Session's,
shown on its view and status, and an Actor changed later does not change
them. A Session whose Actor does not appear within a grace period fails
(``actor_not_found: <name>``).

What neither the Session nor its Actor sets is left unset (None) then, and
taken from the actor's code (``actor(queue=, max_duration=, ttl=, retry=,
idle_timeout=)``) when a process's first ``receive`` reports what its code
declared (:func:`take_code_settings`): the manifest wins where both say
something, and a setting once taken is kept (a later Run's code does not
change it), as the Actor's are. Until then the default applies (a queue of
100, 3 attempts; no limit for the others). The code cannot be known before a
process runs it, so the first preparation of a Session always uses the
manifest's or the default ``retry``.

The idle expiry (``ttlSeconds``) is enforced here too: an open Session with
no work and no hold for that long closes (``session.closed`` how ``idle``),
releasing its Workspace once its process, if any, is gone.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar

from helmr.control import guards
from helmr.control.lifecycle import finish_closing
from helmr.control.views import load_session
from helmr.protocol import ActorSettings
from helmr.protocol.api import SessionView
from helmr.store import ReadTx, SessionLimits, Tx, sessions

T = TypeVar("T")


def resolve(tx: Tx, session_id: str, limits: SessionLimits) -> SessionView:
    """Stores the Session's limits, once: a Session whose limits are resolved keeps them."""
    session = sessions.require(tx, session_id)
    if session.limits is None:
        sessions.resolve_limits(tx, session_id, limits)
    return load_session(tx, session_id)


def take_code_settings(tx: Tx, session_id: str, epoch: int, declared: ActorSettings) -> None:
    """Takes what the actor's code ``declared`` for each of the Session's limits still
    unset, as its process (``epoch``: fenced as every runner call) reports on its
    first ``receive``. A maximum Run duration taken while this Run already runs
    counts from now (the preparation's end sets it otherwise)."""
    session = guards.runner(tx, session_id, epoch)
    limits = session.limits
    if limits is None:
        return  # not resolved yet; no runner starts before (the supervisor resolves first)
    taken = with_code_settings(limits, declared)
    if taken == limits:
        return
    run_starts_now = (
        limits.max_run_duration is None
        and taken.max_run_duration is not None
        and session.prepare_deadline_at is None
    )
    sessions.set_limits(tx, session_id, taken)
    if run_starts_now and taken.max_run_duration is not None:
        sessions.run_deadline(tx, session_id, tx.now + taken.max_run_duration)


def with_code_settings(limits: SessionLimits, declared: ActorSettings) -> SessionLimits:
    """``limits`` with each one unset taken from what the code ``declared``."""
    return replace(
        limits,
        queue_limit=_first(limits.queue_limit, declared.queue),
        max_run_duration=_first(limits.max_run_duration, _seconds(declared.max_duration)),
        idle_ttl=_first(limits.idle_ttl, _seconds(declared.ttl)),
        idle_timeout_seconds=_first(limits.idle_timeout_seconds, declared.idle_timeout),
        retry_max_attempts=_first(limits.retry_max_attempts, declared.retry),
    )


def _first(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def _seconds(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def unresolved(rt: ReadTx) -> list[SessionView]:
    """Open or closing Sessions whose limits are not resolved yet (their Actor not read)."""
    return [load_session(rt, session.id) for session in sessions.without_limits(rt)]


def expire_idle(tx: Tx, now: datetime) -> list[str]:
    """Closes every open Session idle past its ``ttlSeconds`` (``close_how`` ``idle``):
    no queued or running Turn and no hold since its last Turn ended (or it opened).

    A live process (a warm runner waiting for work) is asked to stop
    (reason ``idle``); the Session is ``closed`` once it is gone. Returns the
    Sessions closed or closing now.
    """
    expired = [session_id for session_id, at in _idle_expiries(tx) if at <= now]
    for session_id in expired:
        sessions.begin_closing(tx, session_id, "idle")
        finish_closing(tx, session_id)
    return expired


def next_idle_expiry(rt: ReadTx) -> datetime | None:
    """When the next open Session idle now reaches its ``ttlSeconds``."""
    return min((at for _, at in _idle_expiries(rt)), default=None)


def _idle_expiries(rt: ReadTx) -> list[tuple[str, datetime]]:
    return [
        (session.id, idle_since + session.limits.idle_ttl)
        for session, idle_since in sessions.idle_with_ttl(rt)
        if session.limits is not None and session.limits.idle_ttl is not None
    ]
