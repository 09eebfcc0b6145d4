"""The stop channel's runner end: one background task per process that keeps a
long poll open on ``stops`` for the turn it holds and sets that turn's signal
the moment the control plane accepts a stop of it (an interrupt, a cancel) or
ends it elsewhere (its deadline, a failed session).

A busy process holds one poll for many turns: the control plane keeps it open
while each settlement starts the process's next turn, and answers the turn it
runs now once a stop of it is accepted (``helmr.control.stop_notices``). A turn the
process settled itself is never an answer; the poll ends with nothing to stop once
the process runs no turn.

Without it a handler inside a long call (a provider request) would hear of
the stop only at its next call for the turn, or at SIGTERM once the stop grace
period has passed.
"""

from __future__ import annotations

import asyncio
import logging

from helmr.errors import HelmrError, StaleEpoch
from helmr.protocol import StopsReply, StopsRequest, routes
from helmr.runner.session import RECEIVE_WINDOW, Session
from helmr.runner.transport import Transport
from helmr.runner.turn import Turn

log = logging.getLogger(__name__)

STOP_REQUESTED = "stop_requested"
"""The signal's reason when the stop channel set it."""

STOPS_WINDOW = RECEIVE_WINDOW
"""Seconds one ``stops`` request may wait (a running Turn\'s stop channel), as long as
a ``receive``: each window is one more request to the control plane."""

ERROR_PAUSE = 1.0
"""Seconds to wait before polling again after a poll failed."""


async def listen_for_stops(session: Session, transport: Transport) -> None:
    """Runs until cancelled, or until the process is fenced."""
    while True:
        turn = await session.next_unsignalled_turn()
        # A settlement of it sent, its reply first: its commit may be what ended the last
        # poll (the process runs no turn now), and would answer a poll for it at once.
        await turn._settlement_answered()
        if turn.settled:
            continue
        try:
            reply = await transport.call(
                routes.stops(session.id),
                StopsRequest(turn_ids=[turn.id], timeout=STOPS_WINDOW),
                wait=STOPS_WINDOW,
            )
        except StaleEpoch:
            return  # a newer process runs the session: nothing of ours to stop
        except (HelmrError, OSError) as e:  # OSError: the reply never came (TimeoutError)
            # The transport already retried what a restarting control plane answers.
            log.warning("stop channel: %r; polling again in %.0f s", e, ERROR_PAUSE)
            await asyncio.sleep(ERROR_PAUSE)
            continue
        # The poll may have outlived its turn: a settlement's ``next`` started the one
        # this process holds now, and the answer names that one.
        _signal(StopsReply.from_json(reply), turn, session._unsettled_turn())


def _signal(reply: StopsReply, *turns: Turn | None) -> None:
    for turn in turns:
        if turn is not None and turn.id in reply.turn_ids and not turn.settled:
            log.info("stop requested for turn %s: setting its signal", turn.id)
            turn.signal.abort(STOP_REQUESTED)
