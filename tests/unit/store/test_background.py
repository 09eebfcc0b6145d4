"""``Store.background()``: the same database and change feed, and on PostgreSQL
connections of its own, so a busy lane never holds up the other (issue 11: after
a restart at 5,000 Sessions, kopf's resumes queued the API's first write 33 s)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from helmr.events import EventKind
from helmr.store import ReadTx, Store
from helmr.store.postgres import BACKGROUND_CONNECTIONS, CONNECTIONS
from tests.compose import new_session
from tests.postgres import PostgresServer

WAIT = 30.0
"""Seconds a transaction that must not be held up gets: a failure, not a figure."""


async def test_the_background_lane_is_the_same_store(store_location: str | Path) -> None:
    async with await Store.open(store_location) as store:
        lane = store.background()
        observed: list[tuple[str, str]] = []
        # Set after the lane was made: the lane reports to it all the same, as itself.
        store.observe = lambda kind, name, seconds: observed.append((kind, name))
        session_id = await new_session(lane, "s")
        await store.page(session_id)
        assert observed == [("write", "background"), ("read", "requests")]
        with store.watching(session_id) as changed:
            event = await lane.append_event(session_id, EventKind.TURN_OUTPUT, "x")
            await asyncio.wait_for(changed.wait(), WAIT)
        assert (await store.page(session_id)).records[-1] == event
        assert session_id in await store.changed_sessions(timeout=0)


def _held(release: threading.Event) -> Callable[[ReadTx], None]:
    def hold(rt: ReadTx) -> None:
        rt.conn.execute("SELECT 1")
        release.wait()

    return hold


async def test_a_busy_lane_holds_up_neither_the_other(postgres_server: PostgresServer) -> None:
    with postgres_server.database() as url:
        async with await Store.open(url) as store:
            session_id = await new_session(store, "s")
            for busy, other, threads in (
                (store.background(), store, BACKGROUND_CONNECTIONS),
                (store, store.background(), CONNECTIONS),
            ):
                release = threading.Event()
                # Every thread of the busy lane holds a connection, and more wait.
                held = [
                    asyncio.ensure_future(busy.read(_held(release))) for _ in range(threads + 4)
                ]
                try:
                    await asyncio.sleep(0.2)  # let them take their connections
                    await asyncio.wait_for(other.page(session_id), WAIT)
                    await asyncio.wait_for(
                        other.append_event(session_id, EventKind.TURN_OUTPUT, "x"), WAIT
                    )
                    assert not any(task.done() for task in held)
                finally:
                    release.set()
                    await asyncio.gather(*held)
