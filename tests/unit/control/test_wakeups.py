"""No wake-up is lost between a waiter and a commit (issue 9, item 7a).

The suspects were the refcounted per-Session signals and the runner's receive
long poll. These tests pin down the orders that could lose one: a watch
replaced while another waiter still holds the old one, a waiter's last
watcher leaving after a fresh watch was made, and a receive whose window ends
as work arrives; then interleave them at random across many sessions.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from helmr.errors import ReceiveTimeout
from helmr.events import EventKind
from helmr.store import Store
from tests.unit.control.harness import Harness

SESSIONS = 10
TURNS_PER_SESSION = 40


async def test_a_watch_left_by_its_last_watcher_keeps_the_fresh_one(h: Harness) -> None:
    store: Store = h.store
    session = await h.session()
    slow_waiter = store.watching(session.id)
    quick_waiter = store.watching(session.id)
    slow, quick = slow_waiter.__enter__(), quick_waiter.__enter__()
    await h.control.enqueue(session.id, "wakes both")
    assert quick.is_set()
    assert slow.is_set()
    quick_waiter.__exit__(None, None, None)

    # The quick waiter comes round first and gets a fresh signal; then the slow
    # one leaves the old signal as its last watcher, which must keep the fresh one.
    with store.watching(session.id) as fresh:
        assert not fresh.is_set()  # a fresh signal, not the one that was set
        slow_waiter.__exit__(None, None, None)
        await h.control.enqueue(session.id, "wakes the fresh one")
        assert fresh.is_set()
    assert not store._signals._watches  # nobody waits: nothing is kept


async def test_a_receive_whose_window_ends_as_work_arrives_answers_it_or_the_next(
    h: Harness,
) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for attempt in range(50):
        window = asyncio.create_task(h.control.receive(session.id, epoch, timeout=0.001))
        await asyncio.sleep(0.001 * (attempt % 3))
        queued = await h.control.enqueue(session.id, attempt)
        try:
            turn = await window
        except ReceiveTimeout:
            turn = await h.control.receive(session.id, epoch, timeout=5)
        assert turn is not None
        assert turn.id == queued.id
        await h.control.complete(session.id, epoch, turn.id)


async def test_turns_from_two_sources_across_sessions_each_run_exactly_once(h: Harness) -> None:
    rng = random.Random(7)
    sessions = [await h.session() for _ in range(SESSIONS)]
    epochs = {s.id: await h.control.process_started(s.id) for s in sessions}
    done = asyncio.Event()

    async def runner(session_id: str) -> None:
        """Receive windows short (a runner near its idle end) and long (one that
        only a commit wakes in time: a lost wake-up stalls it past the timeout)."""
        completed = 0
        while completed < TURNS_PER_SESSION:
            try:
                turn = await h.control.receive(
                    session_id, epochs[session_id], timeout=rng.choice((0.0, 0.005, 30.0))
                )
            except ReceiveTimeout:
                continue
            assert turn is not None
            if rng.random() < 0.3:
                await asyncio.sleep(0.002)  # busy: work arrives while the runner is away
            await h.control.complete(session_id, epochs[session_id], turn.id)
            completed += 1

    async def watcher(session_id: str) -> None:
        """Another long poll on the same session: the watches' refcounts churn."""
        after = 0
        while not done.is_set():
            page = await h.control.wait_events(session_id, after, timeout=0.01)
            after = page.next_after

    async def source(name: str) -> None:
        for n in range(TURNS_PER_SESSION // 2):
            for session in rng.sample(sessions, len(sessions)):
                await h.control.enqueue(session.id, f"{name} {n}", source=name)
            await asyncio.sleep(rng.choice((0.0, 0.0, 0.003, 0.02)))

    watchers = [asyncio.create_task(watcher(s.id)) for s in sessions]
    # About 1 s on SQLite, a few on PostgreSQL (a round trip per statement); a lost
    # wake-up waits out a 30 s window.
    async with asyncio.timeout(25):
        await asyncio.gather(*(runner(s.id) for s in sessions), source("api"), source("kubernetes"))
    done.set()
    await asyncio.gather(*watchers)

    for session in sessions:
        events = await h.events(session.id)
        queued = [e.turn_id for e in events if e.kind == EventKind.TURN_QUEUED]
        running = Counter(e.turn_id for e in events if e.kind == EventKind.TURN_RUNNING)
        completed = Counter(e.turn_id for e in events if e.kind == EventKind.TURN_COMPLETED)
        assert len(queued) == TURNS_PER_SESSION
        assert all(running[t] == 1 and completed[t] == 1 for t in queued)
