"""Several Stores on one PostgreSQL database, as several control-plane replicas:
their appends to one Session share one gapless sequence, one's commit wakes
the other's waiters and change feed (LISTEN/NOTIFY), and both carry on after
the server restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from functools import partial

import pytest

from helmr.errors import Unavailable
from helmr.events import EventKind
from helmr.store import Store, Tx, mirror_cursors, timeline
from tests.compose import new_session
from tests.postgres import PostgresServer

APPENDS = 300
OUTAGE = 8.0
OUTPUT = EventKind.TURN_OUTPUT


@pytest.fixture
async def replicas(postgres_server: PostgresServer) -> AsyncIterator[tuple[Store, Store]]:
    with postgres_server.database() as url:
        async with await Store.open(url) as one, await Store.open(url) as two:
            yield one, two


def _append_with_output(tx: Tx, session_id: str, n: int) -> list[int]:
    """An event and keyed output in one transaction (the lock is taken once per append)."""
    first = timeline.append(tx, session_id, OUTPUT, n)
    second = timeline.append_output(
        tx, session_id, None, f"{n}", idempotency_key=f"k{n % 50}", process_epoch=None
    )
    return [first.sequence, second.sequence]


async def test_two_replicas_appending_to_one_session_share_a_gapless_sequence(
    replicas: tuple[Store, Store],
) -> None:
    one, two = replicas
    session = await new_session(one)

    async def writer(store: Store, start: int) -> list[int]:
        taken: list[int] = []
        for n in range(start, start + APPENDS, 4):
            batch = [
                store.write(partial(_append_with_output, session_id=session, n=n + k))
                for k in range(4)
            ]
            for sequences in await asyncio.gather(*batch):
                taken += sequences
        return taken

    first, second = await asyncio.gather(writer(one, 0), writer(two, APPENDS))
    # Keyed output repeats the first event of its key: those sequences are shared.
    acknowledged = set(first) | set(second)
    stored = []
    after = 0
    while True:
        page = await two.page(session, after, 1000)
        stored += [event.sequence for event in page.records]
        after = page.next_after
        if not page.has_more:
            break
    assert stored == list(range(1, len(stored) + 1))
    assert acknowledged == set(stored)
    keyed = await one.read(
        lambda rt: rt.conn.execute("SELECT count(*) FROM output_keys").fetchone()[0]
    )
    assert keyed == 50  # each key stored once, whichever replica wrote it first


async def test_a_commit_on_one_replica_wakes_the_others_waiters_and_feed(
    replicas: tuple[Store, Store],
) -> None:
    one, two = replicas
    session, other = await new_session(one, "w1"), await new_session(one, "w2")
    await two.changed_sessions(timeout=1)  # the sessions' creation, if it came
    with two.watching(session) as woken, two.watching(other) as not_woken:
        await one.append_event(session, OUTPUT, "from one")
        await asyncio.wait_for(woken.wait(), timeout=5)
        assert not not_woken.is_set()
    assert await two.changed_sessions(timeout=5) == {session}
    # Its own commit wakes a replica's waiters at once, not through the echo.
    with one.watching(session) as own:
        await one.append_event(session, OUTPUT, "again")
        assert own.is_set()


async def test_a_replicas_feed_drops_the_echo_of_its_own_commits_and_hears_the_others(
    replicas: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = replicas
    own, others = await new_session(one, "w1"), await new_session(one, "w2")
    published: list[list[str]] = []
    publish = one._signals.publish

    def recorded(session_ids: Iterable[str], queues: Mapping[str, bool] | None = None) -> None:
        published.append(list(session_ids))
        publish(published[-1], queues)

    monkeypatch.setattr(one._signals, "publish", recorded)
    await one.append_event(own, OUTPUT, "own")  # published as the write returns
    # Committed after it, so notified after it on the one channel: once one's
    # feed hears this, it has read (and dropped) the echo of its own commit.
    with one.watching(others) as heard:
        await two.append_event(others, OUTPUT, "the other's")
        await asyncio.wait_for(heard.wait(), timeout=5)
    assert published == [[own], [others]]


async def test_both_replicas_carry_on_after_the_server_restarts(
    postgres_server: PostgresServer, replicas: tuple[Store, Store]
) -> None:
    one, two = replicas
    session = await new_session(one)
    before = await one.append_event(session, OUTPUT, "before")
    await asyncio.to_thread(postgres_server.restart)
    # Every pooled connection broke: the first write finds out and runs on new ones.
    after = await one.append_event(session, OUTPUT, "after")
    assert after.sequence == before.sequence + 1
    assert [e.data for e in (await two.page(session)).records] == ["before", "after"]
    # The other replica's feed reconnects (after a pause), waking its waiters
    # once in case it missed a commit...
    async with asyncio.timeout(10):
        while True:
            with two.watching(session) as woken:
                await one.append_event(session, OUTPUT, "heard?")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=0.5)
                    break
    # ... and from then on hears each commit.
    with two.watching(session) as woken:
        await one.append_event(session, OUTPUT, "heard")
        await asyncio.wait_for(woken.wait(), timeout=5)


async def test_commits_made_while_a_replicas_feed_reconnects_reach_its_change_feed(
    postgres_server: PostgresServer, replicas: tuple[Store, Store]
) -> None:
    one, two = replicas
    session, quiet = await new_session(one, "w1"), await new_session(one, "w2")
    mirrored = await one.append_event(quiet, OUTPUT, "mirrored")
    await one.write(partial(mirror_cursors.save, cursors={quiet: mirrored.sequence}))
    await two.changed_sessions(timeout=1)  # what came before
    await asyncio.to_thread(postgres_server.restart)
    # Committed before the other's feed listens again: its NOTIFY reaches nobody.
    await one.append_event(session, OUTPUT, "unannounced")
    heard: set[str] = set()
    async with asyncio.timeout(10):
        while session not in heard:
            heard |= await two.changed_sessions(timeout=1)
    # What the mirror has followed already is not announced again.
    assert quiet not in heard


async def test_the_pool_is_back_within_about_a_second_of_a_long_outage_ending(
    postgres_server: PostgresServer, replicas: tuple[Store, Store]
) -> None:
    one, _ = replicas
    session = await new_session(one)
    halted = time.monotonic()
    await asyncio.to_thread(postgres_server.halt)
    try:
        # The pool finds its connections dead and reconnects while the server is away.
        with pytest.raises(Unavailable):
            await one.append_event(session, OUTPUT, "refused")
        await asyncio.sleep(halted + OUTAGE - time.monotonic())
    finally:
        await asyncio.to_thread(postgres_server.resume)
    resumed = time.monotonic()
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(Unavailable):
                await one.append_event(session, OUTPUT, "back")
                break
    # With psycopg_pool's doubling backoff its attempt after 8 s came at 15 s.
    assert time.monotonic() - resumed < 2.5
