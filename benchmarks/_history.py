"""A long history for ``bench_scale.py``: completed Turns written straight into a
store, spread over open Sessions, as if each Session's runner had completed them."""

from __future__ import annotations

import asyncio

from helmr.control import Control


async def seed_history(control: Control, epochs: dict[str, int], turns: int) -> None:
    """``turns`` completed Turns over the Sessions of ``epochs`` (id -> the epoch of
    its running process), then marked as mirrored."""
    ids = list(epochs)
    sessions = len(ids)
    per_session = [turns // sessions + (i < turns % sessions) for i in range(sessions)]
    # A few Sessions at a time: the writer's commits are what this costs.
    batch = 32
    for start in range(0, sessions, batch):
        await asyncio.gather(
            *(
                _history(control, ids[i], epochs[ids[i]], per_session[i])
                for i in range(start, min(start + batch, sessions))
            )
        )
    # As if a status mirror had followed the history while it was made: its
    # first pass then reads only what is new (not the whole seeded history).
    await control.save_mirrored_through(
        {session_id: await _last_event(control, session_id) for session_id in ids}
    )


async def _last_event(control: Control, session_id: str) -> int:
    after = 0
    while True:
        page = await control.list_events(session_id, after, 1000)
        after = page.next_after
        if not page.has_more:
            return after


async def _history(control: Control, session_id: str, epoch: int, turns: int) -> None:
    for n in range(turns):
        await control.enqueue(session_id, {"history": n})
        turn = await control.receive(session_id, epoch, timeout=0)
        assert turn is not None
        await control.complete(session_id, epoch, turn.id)
