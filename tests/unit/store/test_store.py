"""The timeline store: sequences, idempotency, pages, transactions, signals, retention."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from helmr.errors import InvalidInput, NotFound
from helmr.events import EventKind, lifecycle_event_id
from helmr.store import Expired, Store, Tx, sessions, timeline, turns
from helmr.store.schema import SCHEMA_VERSION
from helmr.store.signals import QUEUED_HINTS, Signals
from tests.compose import Clock, new_session
from tests.unit.counting import CountingConnection
from tests.unit.store.raw import Plain, plain

OUTPUT = EventKind.TURN_OUTPUT


@pytest.fixture
async def store(store_location: str | Path) -> AsyncIterator[Store]:
    async with await Store.open(store_location) as opened:
        yield opened


async def test_sequences_are_per_session_shared_by_all_kinds_and_gap_free(store: Store) -> None:
    one, two = await new_session(store, "w1"), await new_session(store, "w2")
    kinds = [OUTPUT, EventKind.TURN_QUEUED, EventKind.SESSION_CLOSE, OUTPUT]
    appended = [await store.append_event(one, kind, {}) for kind in kinds]
    other = await store.append_event(two, OUTPUT, "x")
    assert [e.sequence for e in appended] == [1, 2, 3, 4]
    assert other.sequence == 1
    page = await store.page(one)
    assert [(e.id, e.sequence, e.kind) for e in page.records] == [
        (e.id, e.sequence, e.kind) for e in appended
    ]


async def test_a_lifecycle_event_is_inserted_once_and_leaves_no_gap(store: Store) -> None:
    session = await new_session(store)
    event_id = lifecycle_event_id(session, EventKind.SESSION_CLOSE)
    first = await store.append_event(session, EventKind.SESSION_CLOSE, {}, event_id=event_id)
    again = await store.append_event(session, EventKind.SESSION_CLOSE, {"x": 1}, event_id=event_id)
    after = await store.append_event(session, OUTPUT, "next")
    assert again == first
    assert first.id == f"{session}:session.close"
    assert after.sequence == first.sequence + 1


async def test_an_event_takes_one_statement_where_a_with_may_update(store: Store) -> None:
    session = await new_session(store)

    def append(tx: Tx) -> list[str]:
        counted = CountingConnection(tx.conn)
        within = Tx(counted, tx.dialect, tx.now)
        within.lock(session)  # as a write of the Session does first (PostgreSQL)
        counted.statements.clear()
        timeline.append(within, session, OUTPUT, "x")
        return counted.statements

    statements = await store.write(append)
    # SQLite takes the sequence and inserts in two (in process, no round trip to save).
    dialect = await store.read(lambda tx: tx.dialect)
    assert len(statements) == (1 if dialect.updates_in_with else 2), statements
    page = await store.page(session)
    assert [(e.sequence, e.data) for e in page.records] == [(1, "x")]


async def test_pages_follow_after_and_limit(store: Store) -> None:
    session = await new_session(store)
    for n in range(5):
        await store.append_event(session, OUTPUT, n)
    first = await store.page(session, after=0, limit=2)
    assert ([e.sequence for e in first.records], first.next_after, first.has_more) == (
        [1, 2],
        2,
        True,
    )
    last = await store.page(session, after=3, limit=2)
    assert ([e.sequence for e in last.records], last.next_after, last.has_more) == (
        [4, 5],
        5,
        False,
    )
    empty = await store.page(session, after=5, limit=2)
    assert (empty.records, empty.next_after, empty.has_more, empty.retained_after) == (
        [],
        5,
        False,
        0,
    )
    assert [e.data for e in (await store.page(session, after=1, limit=1)).records] == [1]


async def test_pages_and_appends_need_a_known_session(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.page("ses_missing")
    with pytest.raises(NotFound):
        await store.append_event("ses_missing", OUTPUT, "x")
    with pytest.raises(InvalidInput):
        await store.page("ses_missing", after=-1)


async def test_output_keys_dedupe_per_turn(store: Store) -> None:
    session = await new_session(store)
    turn = await store.write(
        lambda tx: turns.insert(tx, session, input=1, idempotency_key=None, source="api")
    )

    def write(tx: Tx, turn_id: str | None, value: str) -> str:
        return timeline.append_output(
            tx, session, turn_id, value, idempotency_key="k", process_epoch=1
        ).id

    first = await store.write(lambda tx: write(tx, turn.id, "a"))
    again = await store.write(lambda tx: write(tx, turn.id, "b"))
    session_level = await store.write(lambda tx: write(tx, None, "c"))
    assert again == first
    assert session_level != first
    page = await store.page(session)
    assert [e.data for e in page.records] == [
        [{"type": "text", "text": "a"}],
        [{"type": "text", "text": "c"}],
    ]


async def test_a_failing_write_is_rolled_back_alone(store: Store) -> None:
    session = await new_session(store)

    def append_then_fail(tx: Tx) -> None:
        timeline.append(tx, session, OUTPUT, "never")
        raise InvalidInput("no")

    # The gate holds the writer until every write is queued, so they commit as a group.
    gate = threading.Event()
    writes: list[Coroutine[Any, Any, object]] = [store.write(lambda tx: gate.wait(10))]
    writes += [store.append_event(session, OUTPUT, n) for n in range(20)]
    writes.insert(11, store.write(append_then_fail))
    gathered = asyncio.gather(*writes, return_exceptions=True)
    await asyncio.sleep(0)
    gate.set()
    results = await gathered
    assert isinstance(results[11], InvalidInput)
    page = await store.page(session, limit=100)
    assert [e.sequence for e in page.records] == list(range(1, 21))
    assert "never" not in [e.data for e in page.records]


async def test_an_abandoned_write_still_commits(store_location: str | Path) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store)
        write = asyncio.create_task(store.append_event(session, OUTPUT, "kept"))
        await asyncio.sleep(0)  # queued with the backend
        write.cancel()
        with pytest.raises(asyncio.CancelledError):
            await write
        await store.append_event(session, OUTPUT, "after")
    # Closing lets every queued or running write finish; on PostgreSQL the two
    # writes ran on two connections, in either order.
    async with await Store.open(store_location) as store:
        page = await store.page(session)
    assert sorted(e.data for e in page.records) == ["after", "kept"]  # type: ignore[type-var]


async def test_acknowledged_writes_survive_reopening(store_location: str | Path) -> None:
    async with await Store.open(store_location) as first:
        session = await new_session(first)
        event = await first.append_event(session, OUTPUT, "durable")
    async with await Store.open(store_location) as second:
        assert (await second.page(session)).records == [event]


async def test_a_commit_wakes_the_watchers_of_its_session_only(store: Store) -> None:
    one, two = await new_session(store, "w1"), await new_session(store, "w2")
    with store.watching(one) as watch_one, store.watching(two) as watch_two:
        await store.append_event(one, OUTPUT, "x")
        assert watch_one.is_set()
        assert not watch_two.is_set()
        with store.watching(one) as fresh:
            assert not fresh.is_set()  # a new signal for the next commit
    assert not store._signals._watches  # nobody waits: nothing is kept


async def test_the_change_feed_lists_each_touched_session_once(store: Store) -> None:
    one, two = await new_session(store, "w1"), await new_session(store, "w2")
    await store.changed_sessions(timeout=0)
    for _ in range(3):
        await store.append_event(one, OUTPUT, "x")
    await store.append_event(two, OUTPUT, "y")
    assert await store.changed_sessions(timeout=0) == {one, two}
    assert await store.changed_sessions(timeout=0) == set()


async def test_a_commit_that_queues_a_turn_leaves_a_hint_asked_once(store: Store) -> None:
    one, two = await new_session(store, "w1"), await new_session(store, "w2")
    queue = partial(turns.insert, input="x", idempotency_key=None, source="api")
    turn = await store.write(partial(queue, session_id=one))
    await store.append_event(two, OUTPUT, "x")  # touches, queues nothing
    assert (store.turn_queued(two), store.turn_queued(one), store.turn_queued(one)) == (
        False,
        True,
        False,
    )
    await store.write(partial(queue, session_id=one))
    await store.write(lambda tx: turns.started(tx, turn, epoch=1, deadline=None))
    assert not store.turn_queued(one)  # a Turn started since: a receive reads first


async def test_the_last_queue_change_of_a_transaction_wins(store: Store) -> None:
    session = await new_session(store, "w1")

    def queued_then_started(tx: Tx) -> None:
        turn = turns.insert(tx, session, input="x", idempotency_key=None, source="api")
        turns.started(tx, turn, epoch=1, deadline=None)
        turns.insert(tx, session, input="y", idempotency_key=None, source="api")

    await store.write(queued_then_started)
    assert store.turn_queued(session)


def test_queued_hints_are_capped_the_oldest_forgotten() -> None:
    signals = Signals()
    sessions_ = [f"s{n}" for n in range(QUEUED_HINTS + 1)]
    signals.publish([], dict.fromkeys(sessions_, True))
    assert not signals.turn_queued(sessions_[0])
    assert signals.turn_queued(sessions_[1])
    assert len(signals._queued) == QUEUED_HINTS - 1


async def test_a_database_of_another_schema_version_is_refused(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location):
        pass
    with plain(store_location) as db:
        db.version = 99
    with pytest.raises(RuntimeError, match="schema version 99"):
        await Store.open(store_location)


LIMITS_COLUMNS = (
    "limits_resolved_at",
    "queue_limit",
    "max_run_duration_s",
    "idle_ttl_s",
    "idle_timeout_s",
    "retry_max_attempts",
    "retry_backoff_s",
    "run_deadline_at",
    "prepare_deadline_at",
    "preparation_failures",
    "retry_at",
)


def _rewind_to_version_1(db: Plain) -> None:
    db.drop_version_10()
    db.execute("ALTER TABLE sessions DROP COLUMN awaiting_cut")
    db.execute("DROP TABLE leader_term")
    db.execute("ALTER TABLE sessions DROP COLUMN mirrored_event_seq")
    db.execute("DROP TABLE storage")
    for column in LIMITS_COLUMNS:
        db.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
    db.execute("DROP TABLE saves")
    db.execute("DROP TABLE workspaces")
    db.execute("DROP INDEX sessions_stop_deadline")
    db.execute("ALTER TABLE sessions DROP COLUMN stop_deadline_at")
    db.version = 1


async def test_a_version_1_database_is_migrated_and_keeps_its_rows(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store)
    # Version 1 had no sessions.stop_deadline_at (2), no workspaces nor saves (3),
    # no resolved limits nor preparation columns (4), no storage table (5), no
    # status mirror cursors (6), no leader term (7), no turn-aligned saves (9).
    with plain(store_location) as db:
        _rewind_to_version_1(db)
    async with await Store.open(store_location) as store:
        row = await store.read(lambda rt: sessions.require(rt, session))
        assert (row.id, row.stop_deadline_at, row.limits) == (session, None, None)
    with plain(store_location) as db:
        assert db.version == SCHEMA_VERSION
        assert db.execute("SELECT count(*) FROM saves")[0][0] == 0
        assert db.execute("SELECT count(*) FROM storage")[0][0] == 0
        assert db.execute("SELECT term, holder FROM leader_term") == [(0, "")]


async def test_a_migrated_database_is_what_a_new_one_is(
    store_location: str | Path, tmp_path: Path
) -> None:
    """The schema of a new database is written once (schema._SCHEMA): a database
    brought to it from version 1 by every migration has the same tables, columns,
    constraints and indexes."""
    async with await Store.open(store_location) as store:
        await new_session(store)
    with plain(store_location) as db:
        fresh = db.schema()
        _rewind_to_version_1(db)
    async with await Store.open(store_location):
        pass
    with plain(store_location) as db:
        assert db.schema() == fresh


async def test_retention_removes_a_prefix_of_events_and_ended_payloads(
    store_location: str | Path,
) -> None:
    clock = Clock()
    async with await Store.open(store_location, clock=clock, retention=timedelta(days=1)) as s:
        session = await new_session(s)
        ended = await s.write(
            lambda tx: turns.insert(tx, session, input="old", idempotency_key=None, source="api")
        )
        await s.write(
            lambda tx: turns.ended(tx, turns.completing(tx, ended, "r"), "completed", None)
        )
        queued = await s.write(
            lambda tx: turns.insert(tx, session, input="new", idempotency_key=None, source="api")
        )
        await s.write(
            lambda tx: timeline.append_output(
                tx, session, None, "old", idempotency_key="k", process_epoch=None
            )
        )
        await s.append_event(session, OUTPUT, "old too")
        clock.advance(timedelta(days=2))
        recent = await s.append_event(session, OUTPUT, "recent")

        expired = await s.expire(clock.now)

        assert (expired.events, expired.turns) == (2, 1)
        page = await s.page(session)
        assert (page.retained_after, [e.id for e in page.records]) == (2, [recent.id])
        old = await s.read(lambda rt: turns.require(rt, session, ended.id))
        assert (old.status, old.payload_expired, old.input, old.result) == (
            "completed",
            True,
            None,
            None,
        )
        kept = await s.read(lambda rt: turns.require(rt, session, queued.id))
        assert (kept.payload_expired, kept.input) == (False, "new")
        assert await s.expire(clock.now) == Expired()
        # A cursor below the boundary gets what is retained and learns what it missed.
        assert (await s.page(session, after=0)).retained_after == 2


async def test_without_a_retention_period_nothing_expires(store: Store) -> None:
    session = await new_session(store)
    await store.append_event(session, OUTPUT, "x")
    await store.expire(Clock().advance(timedelta(days=3650)))
    assert len((await store.page(session)).records) == 1
