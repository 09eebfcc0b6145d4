"""Computer disk pressure: episodes that pause, stop and resolve as a Session's
disk fills and empties (spec/002 ``session.storage_pressure``).

The runner measures its Computer disk and reports the bytes used
(:func:`report`); what they are measured against is the Session's
(:func:`set_limits`: the claim's size and the ``pauseAt``, ``stopAt`` and
``resolveAt`` fractions of its Actor's or Workspace's ``computer`` settings,
written by the operator before each runner starts). One episode at a time per
Session; each transition records one ``session.storage_pressure`` event
{state, usedBytes, capacityBytes, holdId} (``stopped`` adds the ``turnId`` it
interrupted), whose id is the episode and state, so a repeated report records
nothing twice:

- ``paused``: usage reached ``pauseAt``. The Session is held (a hold of reason
  ``storage_pressure``; a Session already held keeps that hold, which the event
  names), so queued Turns wait; a running Turn continues.
  ``resume(hold_id)`` acknowledges the episode: queued Turns run again (the
  agent can free space), and this episode does not pause again.
- ``stopped``: usage reached ``stopAt`` while a Turn ran and the episode had not
  stopped yet (a new episode goes straight here, a paused one moves on, even
  acknowledged). The Turn is ``interrupted`` now (reason ``storage_exhausted``),
  its process asked to stop, and the Session held (the episode's hold while it
  is open, else a new one). Acknowledged with ``resume``, it does not stop again
  within the episode: the Turns run then are the way to free space.
- ``resolved``: usage fell below ``resolveAt``. The episode ends; its
  ``storage_pressure`` hold, if still open, is released (how
  ``storage_resolved``), so nothing waits for an acknowledgement no longer needed.

Between ``resolveAt`` and ``pauseAt`` nothing changes (hysteresis).
"""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from helmr.control import guards
from helmr.control.lifecycle import active_turn, finish_closing, interrupt_turn
from helmr.control.record import record
from helmr.control.stops import stop_request
from helmr.events import EventKind
from helmr.states import ENDED_SESSION_STATUSES, InterruptReason, StopReason, StoragePressureState
from helmr.store import (
    ReadTx,
    SessionRow,
    StorageLimits,
    TurnRow,
    Tx,
    holds,
    sessions,
    storage_pressure,
)
from helmr.store.rows import StorageRow

Level = Literal["clear", "steady", "pause", "stop"]


def set_limits(tx: Tx, session_id: str, limits: StorageLimits) -> None:
    """Stores what the Session's disk is measured against (before each runner starts:
    a Workspace's settings may have changed). An open episode carries on."""
    sessions.require(tx, session_id)
    storage_pressure.set_limits(tx, session_id, limits)


def under_pressure(rt: ReadTx) -> int:
    """How many Sessions not ended are in an episode (paused or stopped)."""
    return storage_pressure.count_under_pressure(rt)


def level(used_bytes: int, limits: StorageLimits) -> Level:
    """Where ``used_bytes`` stands against the thresholds (``steady``: in the hysteresis
    band, or above ``resolveAt`` and below ``pauseAt``)."""
    used = used_bytes / limits.capacity_bytes
    if used >= limits.stop_at:
        return "stop"
    if used >= limits.pause_at:
        return "pause"
    if used < limits.resolve_at:
        return "clear"
    return "steady"


def report(tx: Tx, session_id: str, epoch: int, used_bytes: int) -> StoragePressureState | None:
    """The live runner's measurement of its disk; the episode's new state, if it changed.

    StaleEpoch for any process but the live one. A Session without thresholds
    (no disk was prepared for it) or already ended changes nothing.
    """
    session = guards.runner(tx, session_id, epoch)
    row = storage_pressure.get(tx, session_id)
    if row is None or session.status in ENDED_SESSION_STATUSES:
        return None
    now = level(used_bytes, row.limits)
    stoppable = _stoppable_turn(tx, session)
    if row.state is None:
        if now == "stop" and stoppable is not None:
            return _stop(tx, session, row, row.episode + 1, used_bytes, stoppable)
        if now in ("pause", "stop"):
            return _pause(tx, session, row, used_bytes)
        return None
    if now == "clear":
        return _resolve(tx, session, row, used_bytes)
    if now == "stop" and row.state == "paused" and stoppable is not None:
        return _stop(tx, session, row, row.episode, used_bytes, stoppable)
    return None


def _stoppable_turn(tx: Tx, session: SessionRow) -> TurnRow | None:
    """The Turn a ``stopped`` episode would interrupt: running, not settling its
    outcome, and not already stopping (an interrupt or cancel was accepted)."""
    turn = active_turn(tx, session)
    if turn is None or turn.settling is not None or stop_request(session, turn) is not None:
        return None
    return turn


def _pause(tx: Tx, session: SessionRow, row: StorageRow, used_bytes: int) -> StoragePressureState:
    hold_id = _hold(tx, session, None)
    episode = row.episode + 1
    storage_pressure.set_episode(tx, session.id, episode=episode, state="paused", hold_id=hold_id)
    _record(tx, session, row, episode, "paused", used_bytes, hold_id)
    return "paused"


def _stop(
    tx: Tx, session: SessionRow, row: StorageRow, episode: int, used_bytes: int, turn: TurnRow
) -> StoragePressureState:
    hold_id = _hold(tx, session, turn.id)
    storage_pressure.set_episode(tx, session.id, episode=episode, state="stopped", hold_id=hold_id)
    _record(tx, session, row, episode, "stopped", used_bytes, hold_id, turnId=turn.id)
    interrupt_turn(tx, turn, InterruptReason.STORAGE_EXHAUSTED, holdId=hold_id)
    if session.stop_reason is None:
        sessions.ask_stop(tx, session.id, StopReason.STORAGE_EXHAUSTED)
    finish_closing(tx, session.id)
    return "stopped"


def _resolve(tx: Tx, session: SessionRow, row: StorageRow, used_bytes: int) -> StoragePressureState:
    hold = None if row.hold_id is None else holds.get(tx, row.hold_id)
    # Only the episode's own hold: an interrupt or a recovery gap still needs its resume.
    if hold is not None and hold.released_at is None and hold.reason == "storage_pressure":
        holds.release(tx, hold.id, how="storage_resolved")
        if session.hold is not None and session.hold.id == hold.id:
            sessions.release_hold(tx, session.id)
    storage_pressure.set_episode(tx, session.id, episode=row.episode, state=None, hold_id=None)
    _record(tx, session, row, row.episode, "resolved", used_bytes, row.hold_id)
    return "resolved"


def _hold(tx: Tx, session: SessionRow, turn_id: str | None) -> str:
    """The Session's hold: the one it has (an acknowledgement of it acknowledges
    this episode too), else a new ``storage_pressure`` hold."""
    if session.hold is not None:
        return session.hold.id
    hold = holds.insert(tx, session.id, reason="storage_pressure", scope="session", turn_id=turn_id)
    sessions.hold(tx, session.id, hold.id)
    return hold.id


def _record(
    tx: Tx,
    session: SessionRow,
    row: StorageRow,
    episode: int,
    state: StoragePressureState,
    used_bytes: int,
    hold_id: str | None,
    **details: JsonValue,
) -> None:
    data: dict[str, JsonValue] = {
        "state": state,
        "usedBytes": used_bytes,
        "capacityBytes": row.limits.capacity_bytes,
        "holdId": hold_id,
        **details,
    }
    record(
        tx,
        session.id,
        EventKind.SESSION_STORAGE_PRESSURE,
        data,
        subject=f"{episode}:{state}",
        epoch=session.process_epoch,
    )
