"""An ending process's last look (``receive``'s ``start: false``) fences further starts
for its epoch in the store (:func:`helmr.control.turns.fence_starts`): a start for it
still under way then (a wait woken before the look, its transaction slow to run) finds
the fence and starts nothing, so no Turn is left running for a process gone, whose end
would count as a failure and interrupt a Turn that never ran."""

from __future__ import annotations

from functools import partial

import pytest

from helmr.control import turns
from helmr.errors import ReceiveTimeout
from tests.unit.control.harness import Harness


@pytest.mark.parametrize("woken", [True, False])
async def test_no_turn_starts_for_a_process_after_its_last_look(h: Harness, woken: bool) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    with pytest.raises(ReceiveTimeout):  # nothing was started for it: nothing to give back
        await h.control.started(session.id, epoch)
    late = await h.control.enqueue(session.id, "queued as the process ends")

    # The start a wait of this process had under way, run only now.
    take = partial(turns.take_next, session_id=session.id, epoch=epoch, woken=woken)
    assert await h.store.write(take) is None
    assert (await h.control.get_turn(session.id, late.id)).status == "queued"

    # Its end is no process failure, and the next process runs the Turn.
    outcome = await h.control.process_exited(session.id, epoch, 0)
    assert outcome.outcome != "failed"
    following = await h.control.process_started(session.id)
    started = await h.control.receive(session.id, following, timeout=0)
    assert started is not None
    assert started.id == late.id


async def test_the_last_look_answers_a_turn_started_before_it_to_be_given_back(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, running = await h.running(session.id)
    given = await h.control.started(session.id, epoch)
    assert given is not None
    assert given.id == running.id
