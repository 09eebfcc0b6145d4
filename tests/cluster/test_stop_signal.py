"""A stop reaches a busy handler at once: the stop channel, with real runner pods.

Issue 9 item 5: "`turn.signal` fires promptly ... the SDK sets `turn.signal`
within 100 ms of the request being accepted". The misbehaving echo's
``{"await_signal": s}`` (``tests/actors/misbehaving.py``) sleeps as a handler in
a long provider call does, makes no call for its Turn, and stops the moment its
signal fires. Before the stop channel it heard nothing until the stop grace
period ended and its process was killed as a counted failure; now it lets go at
once, the Turn converges ``interrupted`` within the grace, and nothing counts as
a process failure (docs/semantics.md, "Interruption is cooperative").
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from helmr.client import SessionRef, TurnRef

from .sessions import all_events, eventually, signal_heard

GRACE = timedelta(seconds=3)
"""``HELMR_STOP_GRACE_SECONDS`` of the test operator (conftest)."""


@pytest.fixture
def session(misbehaving_session: SessionRef) -> SessionRef:
    return misbehaving_session


async def running_epoch(turn: TurnRef) -> int | None:
    view = await turn.retrieve()
    return view.epoch if view.status == "running" else None


async def test_a_handler_awaiting_its_signal_in_a_long_call_ends_promptly_on_interrupt(
    session: SessionRef,
) -> None:
    busy = await session.enqueue({"await_signal": 120})
    after = await session.enqueue("after the interrupt")
    epoch = await eventually(partial(running_epoch, busy), what=f"{busy.id} to run")

    receipt = await busy.interrupt()

    async def converged() -> bool:
        return (await busy.retrieve()).status == "interrupted"

    await eventually(converged, timeout=GRACE.total_seconds(), what="the Turn to converge")
    events = await all_events(session)
    heard = signal_heard(events, busy.id)
    assert heard is not None, "the handler never heard its signal"
    assert heard["signal"] == "stop_requested"
    [ended] = [e for e in events if e.kind == "turn.interrupted"]
    assert ended.created_at - receipt.accepted_at < GRACE
    # It let go within the grace: not a process failure, and the process lives on.
    assert not [e for e in events if e.kind == "session.process_failed"]
    state = await session.retrieve()
    assert (state.process_live, state.process_epoch, state.consecutive_failures) == (
        True,
        epoch,
        0,
    )
    # The interrupt holds the Session; after resume the same process runs the next Turn.
    await session.resume(hold_id=receipt.hold_id)
    done = await after.wait(timeout=60)
    assert (done.status, done.epoch) == ("completed", epoch)
