"""Session controls: open, interrupt, resume, cancel, close, fail.

Each function is one write transaction (run by :class:`helmr.control.Control`
through ``Store.write``).
"""

from __future__ import annotations

from typing import Literal

from helmr.control import guards
from helmr.control.config import ControlConfig
from helmr.control.lifecycle import (
    active_turn,
    cancel_queued,
    fail_session,
    finish_closing,
    request_stop,
)
from helmr.control.record import record
from helmr.control.stops import hold_converged
from helmr.control.views import load_session, stop_receipt
from helmr.errors import Conflict, HoldMismatch, HoldNotConverged, SessionNotOpen, TurnNotActive
from helmr.events import EventKind
from helmr.protocol.api import SessionView, StopReceipt
from helmr.states import ENDED_SESSION_STATUSES, HoldScope
from helmr.store import Tx, holds, sessions, turns


def open_session(
    tx: Tx,
    *,
    namespace: str,
    name: str,
    actor: str,
    workspace: str,
    key: str | None = None,
    idempotency_key: str | None = None,
) -> SessionView:
    """Opens a Session that owns ``workspace``; the same ``(namespace, idempotency_key)``
    returns the same Session.

    Conflict if the Workspace is owned by another Session that is not closed (or
    whose process is still live).
    """
    if idempotency_key is not None:
        existing = sessions.by_idempotency_key(tx, namespace, idempotency_key)
        if existing is not None:
            return load_session(tx, existing.id)
    owner = sessions.workspace_owner(tx, namespace, workspace)
    if owner is not None:
        raise Conflict(
            f"workspace {workspace} is owned by session {owner.id} until it is closed",
            workspace=workspace,
            session_id=owner.id,
        )
    session = sessions.insert(
        tx,
        namespace=namespace,
        name=name,
        actor=actor,
        workspace=workspace,
        key=key,
        idempotency_key=idempotency_key,
    )
    return load_session(tx, session.id)


def interrupt(
    tx: Tx, config: ControlConfig, session_id: str, turn_id: str | None = None
) -> StopReceipt:
    """Holds the Session and asks its running Turn to stop; returns the stop receipt.

    Acceptance may precede physical convergence: the hold and ``session.interrupt``
    are recorded now, while the Turn stays ``running`` (every runner call for it
    refused with ``turn_not_active``) until its process lets go of it (its next
    ``receive``, or its end, :func:`helmr.control.lifecycle.converge_stop`); only
    then is it ``interrupted`` (reason ``interrupt``, with the ``holdId``). The
    process has ``ControlConfig.stop_grace`` to let go before it is stopped
    (``stop_deadline_elapsed``, a process failure).

    Without ``turn_id`` the running Turn, if any, is interrupted (scope
    ``session``); with it, exactly that Turn, which must be running (else
    TurnNotActive; scope ``turn``). Either way the whole Session is held: queued
    work waits until ``resume(hold_id)``, which is refused until the hold has
    converged. Interrupting a held Session returns its hold, except a disk pressure
    hold (``storage_pressure``) while a Turn runs: the interrupt's hold replaces it.
    """
    session = sessions.require(tx, session_id)
    guards.accepting_controls(session)
    if turn_id is None:
        turn = active_turn(tx, session)
    else:
        turn = turns.require(tx, session_id, turn_id)
        if turn.status != "running":
            raise TurnNotActive(f"turn {turn_id} is {turn.status}, not running", turn_id=turn_id)
    if session.hold is not None:
        if turn is None or session.hold.reason != "storage_pressure":
            # While a Turn runs, the only other hold there can be is an interrupt of it.
            return stop_receipt(session.hold)
        # A disk pressure hold lets its running Turn go on; an interrupt stops it,
        # and its resume acknowledges the pressure too.
        holds.release(tx, session.hold.id, how="interrupt")
    scope: HoldScope = "session" if turn_id is None else "turn"
    hold = holds.insert(
        tx, session_id, reason="interrupt", scope=scope, turn_id=None if turn is None else turn.id
    )
    sessions.hold(tx, session_id, hold.id)
    record(
        tx,
        session_id,
        EventKind.SESSION_INTERRUPT,
        {"holdId": hold.id, "turnId": None if turn is None else turn.id, "scope": scope},
        subject=hold.id,
        turn_id=None if turn is None else turn.id,
    )
    if turn is not None:
        request_stop(tx, turn, config.stop_grace)
    finish_closing(tx, session_id)
    return stop_receipt(hold)


def resume(tx: Tx, session_id: str, hold_id: str) -> SessionView:
    """Releases exactly that converged hold; the interrupted Turn is never replayed.

    HoldNotConverged while the hold's interrupted Turn is still stopping (its
    process has not let go of it yet). Repeating the resume of a hold already
    released is accepted while the Session is not held again. Resuming a
    ``process_failures`` hold also resets the consecutive failure count.
    """
    session = sessions.require(tx, session_id)
    guards.accepting_controls(session)
    hold = session.hold
    if hold is not None and hold.id == hold_id:
        if not hold_converged(session):
            raise HoldNotConverged(
                f"hold {hold_id} is not converged: turn {hold.turn_id} is still stopping;"
                " resume once it is interrupted",
                hold_id=hold_id,
                turn_id=hold.turn_id,
            )
        holds.release(tx, hold_id, how="resume")
        sessions.release_hold(tx, session_id, reset_failures=hold.reason == "process_failures")
        record(
            tx,
            session_id,
            EventKind.SESSION_RESUME,
            {"holdId": hold_id, "how": "resume"},
            subject=hold_id,
        )
        return load_session(tx, session_id)
    released = holds.get(tx, hold_id)
    if hold is None and released is not None and released.session_id == session_id:
        return load_session(tx, session_id)
    raise HoldMismatch(
        f"{hold_id} is not the hold of session {session_id}",
        hold_id=hold_id,
        current_hold_id=None if hold is None else hold.id,
    )


def cancel(tx: Tx, session_id: str) -> SessionView:
    """Rejects new input, cancels queued Turns, interrupts the active one, then closes.

    ``cancel_requested_at`` is set at once, and the process is asked to stop
    at once (``finish_closing``; no stop grace). The active Turn stays
    ``running`` (its runner calls refused) until the process has let go of it
    or ended; then it is ``interrupted`` (reason ``cancel``, or ``interrupt`` if
    an interrupt was accepted first), and the Session becomes ``closed`` (how
    ``cancel``) once the process is gone. Cancelling again returns the same
    state; a closing Session is escalated; it cannot be resumed.
    """
    session = sessions.require(tx, session_id)
    if session.cancel_requested_at is not None:
        return load_session(tx, session_id)
    if session.status in ENDED_SESSION_STATUSES:
        raise SessionNotOpen(f"session {session_id} is already {session.status}")
    sessions.begin_closing(tx, session_id, "cancel")
    cancel_queued(tx, session_id, reason=None)
    turn = active_turn(tx, session)
    if turn is not None:
        # Stopping for the cancel now: its maxTurnDuration must not end it otherwise.
        turns.no_deadline(tx, turn)
    finish_closing(tx, session_id)
    return load_session(tx, session_id)


def cancel_own(tx: Tx, session_id: str, epoch: int) -> SessionView:
    """:func:`cancel`, asked by the Session's own live process (an actor cancelling
    its Session: spec/001); fenced as every runner call (StaleEpoch)."""
    guards.runner(tx, session_id, epoch)
    return cancel(tx, session_id)


def close(tx: Tx, session_id: str, *, how: Literal["close", "idle"] = "close") -> SessionView:
    """Stops admission and drains the FIFO, then closes (how ``close``, or ``idle``).

    An idle close records only ``session.closed``; otherwise ``session.close``
    is recorded now. ``how="idle"`` (the operator's idle expiry) is refused
    with Conflict if work arrived meanwhile. Closing again is a no-op.
    """
    session = sessions.require(tx, session_id)
    if session.status in ("closing", "closed"):
        return load_session(tx, session_id)
    if session.status == "failed":
        raise SessionNotOpen(f"session {session_id} has failed")
    idle = session.active_turn_id is None and not turns.count_queued(tx, session_id)
    if how == "idle" and not idle:
        raise Conflict(f"session {session_id} is not idle", session_id=session_id)
    sessions.begin_closing(tx, session_id, how)
    if not idle:
        record(tx, session_id, EventKind.SESSION_CLOSE, {}, subject=None)
    finish_closing(tx, session_id)
    return load_session(tx, session_id)


def fail(tx: Tx, session_id: str, reason: str) -> SessionView:
    """Terminates the Session (e.g. the actor cannot initialize); see ``fail_session``."""
    session = sessions.require(tx, session_id)
    if session.status in ENDED_SESSION_STATUSES:
        return load_session(tx, session_id)
    fail_session(tx, session_id, reason)
    return load_session(tx, session_id)
