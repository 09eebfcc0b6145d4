"""A Session's limits: resolved once from its Actor, then enforced by the store.

The operator resolves them (the Session's override, else its Actor's) on the
Session's first supervisor pass after it opened, whichever way it opened
(API or kubectl), and stores them here; from then on they are the Session's,
shown on its view and status, and an Actor changed later does not change
them. A Session whose Actor does not appear within a grace period fails
(``actor_not_found: <name>``).

The idle expiry (``ttlSeconds``) is enforced here too: an open Session with
no work and no hold for that long closes (``session.closed`` how ``idle``),
releasing its Workspace once its process, if any, is gone.
"""

from __future__ import annotations

from datetime import datetime

from helmr.control.lifecycle import finish_closing
from helmr.control.views import load_session
from helmr.protocol.api import SessionView
from helmr.store import ReadTx, SessionLimits, Tx, sessions


def resolve(tx: Tx, session_id: str, limits: SessionLimits) -> SessionView:
    """Stores the Session's limits, once: a Session whose limits are resolved keeps them."""
    session = sessions.require(tx, session_id)
    if session.limits is None:
        sessions.resolve_limits(tx, session_id, limits)
    return load_session(tx, session_id)


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
        sessions.update(tx, session_id, status="closing", close_how="idle")
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
