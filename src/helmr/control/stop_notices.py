"""Which of the Turns a runner process holds it must stop now: the stop channel's answer.

The runner long-polls this (``POST .../stops``) with the Turns it holds, so a
stop accepted for one of them (an interrupt, a cancel) or a Turn that ended
elsewhere (its deadline, a failed Session) reaches the handler's
``turn.signal`` at once, not at its next call for that Turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from helmr.control import guards
from helmr.control.stops import stop_request
from helmr.store import ReadTx, turns


def requested(rt: ReadTx, session_id: str, epoch: int, turn_ids: Sequence[str]) -> list[str]:
    """The ids among ``turn_ids`` this process must stop: a stop of it was accepted,
    or it is no longer running on this process (StaleEpoch if ``epoch`` is fenced)."""
    session = guards.runner(rt, session_id, epoch)
    to_stop = []
    for turn_id in turn_ids:
        turn = turns.get(rt, turn_id)
        if (
            turn is None
            or turn.session_id != session_id
            or turn.status != "running"
            or turn.epoch != epoch
            or stop_request(session, turn) is not None
        ):
            to_stop.append(turn_id)
    return to_stop
