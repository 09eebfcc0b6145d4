"""Preconditions shared by controls: each raises the error the API reports."""

from __future__ import annotations

from helmr.control.stops import stop_request
from helmr.errors import QueueFull, SessionNotOpen, StaleEpoch, TurnNotActive, TurnSettling
from helmr.states import ENDED_SESSION_STATUSES
from helmr.store import ReadTx, SessionRow, TurnRow, sessions, turns


def accepting_controls(session: SessionRow) -> None:
    """Interrupt, resume and send need a Session that is neither ended nor being cancelled."""
    if session.status in ENDED_SESSION_STATUSES or session.cancel_requested_at is not None:
        raise SessionNotOpen(f"session {session.id} is {_describe(session)}", session_id=session.id)


def admitting(rt: ReadTx, session: SessionRow, queued: int | None = None) -> None:
    """New FIFO work needs an open Session (held is fine) with room in its queue:
    fewer queued Turns than its ``queueLimit`` (QueueFull, 429, otherwise).
    ``queued``: the Session's queued Turns, when the caller read them with it."""
    if session.status != "open":
        raise SessionNotOpen(
            f"session {session.id} is {_describe(session)} and admits no new turns",
            session_id=session.id,
        )
    if session.limits is None:
        return  # not resolved yet: the first supervisor pass reads the Actor
    if queued is None:
        queued = turns.count_queued(rt, session.id)
    if queued >= session.limits.queue:
        raise QueueFull(
            f"session {session.id} already holds {queued} queued turns, its queueLimit;"
            " admit more once some have started",
            session_id=session.id,
            queueLimit=session.limits.queue,
            queued=queued,
        )


def runner(rt: ReadTx, session_id: str, epoch: int) -> SessionRow:
    """The Session, if ``epoch`` is its live process; any other epoch is fenced."""
    session = sessions.require(rt, session_id)
    if not session.process_live or session.process_epoch != epoch:
        live = f"epoch {session.process_epoch}" if session.process_live else "no process"
        raise StaleEpoch(
            f"process epoch {epoch} is fenced for session {session_id} (live: {live}); stop",
            session_id=session_id,
            epoch=epoch,
        )
    return session


def active(rt: ReadTx, session: SessionRow, turn_id: str) -> TurnRow:
    """The Turn, if it is running on the Session's live process and no stop of it
    was accepted (its runner calls are fenced from then on)."""
    return running(session, turns.require(rt, session.id, turn_id))


def running(session: SessionRow, turn: TurnRow) -> TurnRow:
    """:func:`active` of a Turn already read."""
    turn_id = turn.id
    if turn.status != "running" or turn.epoch != session.process_epoch:
        raise TurnNotActive(
            f"turn {turn_id} is {turn.status}, not the active turn", turn_id=turn_id
        )
    stop = stop_request(session, turn)
    if stop is not None:
        raise TurnNotActive(
            f"turn {turn_id} is being stopped ({stop.reason}): stop its work and let go of it",
            turn_id=turn_id,
            reason=stop.reason,
        )
    return turn


def unsettled(turn: TurnRow) -> TurnRow:
    if turn.settling is not None:
        raise TurnSettling(f"turn {turn.id} is settling and accepts no more input", turn_id=turn.id)
    return turn


def _describe(session: SessionRow) -> str:
    return "being cancelled" if session.cancel_requested_at is not None else session.status
