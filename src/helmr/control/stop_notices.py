"""Which of the Turns a runner process holds it must stop now: the stop channel's answer.

The runner long-polls this (``POST .../stops``) with the Turns it holds, so a
stop accepted for one of them (an interrupt, a cancel) or a Turn that ended
elsewhere (its deadline, a failed Session) reaches the handler's
``turn.signal`` at once, not at its next call for that Turn.

A Turn the process settled itself (``completed`` or ``failed``: only a settlement
ends a Turn so) is never an answer: a settlement is no stop, and its handler's signal
must stay clear. So the poll outlives the Turn boundary of a busy process: while the
process runs another Turn (the settlement's ``next`` started it) it waits on, and a
stop of the Turn it runs now answers that Turn's id, listed or not. A process whose
settlements keep starting its next Turn holds one poll for all of them, not one each.
Once the process runs no Turn, the poll ends with nothing to stop, so an idle process
holds no long poll but its ``receive``.
"""

from __future__ import annotations

from collections.abc import Sequence

from helmr.control import guards
from helmr.control.lifecycle import active_turn
from helmr.control.stops import stop_request
from helmr.store import ReadTx, SessionRow, TurnRow, turns

SETTLED_BY_ITS_PROCESS = ("completed", "failed")


def requested(rt: ReadTx, session_id: str, epoch: int, turn_ids: Sequence[str]) -> list[str] | None:
    """The ids this process must stop: among ``turn_ids``, those with a stop accepted or
    no longer running on this process (but those it settled itself); and the Turn it
    runs now if a stop of it was accepted. None while there are none and the process
    runs a Turn (the poll waits on); empty when it runs none (StaleEpoch if ``epoch``
    is fenced)."""
    session = guards.runner(rt, session_id, epoch)
    current = _running_on(session, active_turn(rt, session), epoch)
    to_stop = [] if current is None or stop_request(session, current) is None else [current.id]
    for turn_id in turn_ids:
        if turn_id in to_stop:
            continue
        turn = current if current is not None and current.id == turn_id else turns.get(rt, turn_id)
        if turn is None or turn.session_id != session_id:
            to_stop.append(turn_id)
        elif _running_on(session, turn, epoch) is not None:
            continue  # running, and not stopped (or it would be ``current``, answered)
        elif not (turn.epoch == epoch and turn.status in SETTLED_BY_ITS_PROCESS):
            to_stop.append(turn_id)
    return to_stop if to_stop or current is None else None


def _running_on(session: SessionRow, turn: TurnRow | None, epoch: int) -> TurnRow | None:
    """``turn`` if it is running on the process of ``epoch``."""
    if turn is None or turn.status != "running" or turn.epoch != epoch:
        return None
    return turn if session.process_epoch == epoch else None
