"""Property: under concurrent appends, ``after``/``limit`` paging never skips or repeats.

Four writers append thousands of events (some several per transaction) to a
few Sessions while a reader pages every Session with varying limits. Each
Session's consumed sequences must be exactly 1..N in order, and each record
must be the one its writer was acknowledged for.
"""

from __future__ import annotations

import asyncio
import tempfile
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helmr.events import Event, EventKind
from helmr.store import Store, Tx, timeline
from tests.compose import new_session
from tests.postgres import PostgresServer

WRITERS = 4

# One step of a writer: (session index, how many events in that one transaction).
steps = st.tuples(st.integers(0, 3), st.integers(1, 3))


async def _open_sessions(store: Store, count: int) -> list[str]:
    return [await new_session(store, f"s{n}") for n in range(count)]


def _burst(tx: Tx, session_id: str, writer: int, size: int) -> list[Event]:
    return [
        timeline.append(tx, session_id, EventKind.TURN_OUTPUT, {"writer": writer})
        for _ in range(size)
    ]


async def _scenario(
    location: str | Path, plans: list[list[tuple[int, int]]], session_count: int, limits: list[int]
) -> None:
    async with await Store.open(location) as store:
        session_ids = await _open_sessions(store, session_count)
        acknowledged: dict[str, dict[int, str]] = {sid: {} for sid in session_ids}
        writing = True

        async def writer(number: int, plan: list[tuple[int, int]]) -> None:
            for index, size in plan:
                sid = session_ids[index % session_count]
                burst = partial(_burst, session_id=sid, writer=number, size=size)
                for event in await store.write(burst):
                    assert event.sequence not in acknowledged[sid]
                    acknowledged[sid][event.sequence] = event.id

        async def reader() -> dict[str, list[Event]]:
            consumed: dict[str, list[Event]] = {sid: [] for sid in session_ids}
            cursors = dict.fromkeys(session_ids, 0)
            turn = 0
            while True:
                finished = not writing  # read before the pass: a full pass after the end
                progressed = False
                for sid in session_ids:
                    page = await store.page(sid, cursors[sid], limits[turn % len(limits)])
                    turn += 1
                    # Checked page by page, so a repeat fails at once instead of looping.
                    first = cursors[sid] + 1
                    assert [e.sequence for e in page.records] == list(
                        range(first, first + len(page.records))
                    )
                    consumed[sid].extend(page.records)
                    progressed |= bool(page.records)
                    cursors[sid] = page.next_after
                if finished and not progressed:
                    return consumed

        reading = asyncio.create_task(reader())
        await asyncio.gather(*(writer(n, plan) for n, plan in enumerate(plans)))
        writing = False
        consumed = await reading

        for sid in session_ids:
            sequences = [event.sequence for event in consumed[sid]]
            assert sequences == list(range(1, len(acknowledged[sid]) + 1))
            assert {e.sequence: e.id for e in consumed[sid]} == acknowledged[sid]


def _plans(steps_per_writer: int) -> st.SearchStrategy[list[list[tuple[int, int]]]]:
    plan = st.lists(steps, min_size=steps_per_writer // 2, max_size=steps_per_writer)
    return st.lists(plan, min_size=WRITERS, max_size=WRITERS)


session_counts = st.integers(1, 4)
page_limits = st.lists(st.integers(1, 60), min_size=1, max_size=8)


# Bounded by the examples' work (six runs of thousands of appends), not by
# time: it shares 2 cores with whatever else runs, so it gets more than the
# 30 s of one in-process test, still far below a hang's 600.
@pytest.mark.timeout(120)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=_plans(500), session_count=session_counts, limits=page_limits)
def test_concurrent_appends_are_paged_without_skips_or_repeats_on_sqlite(
    plans: list[list[tuple[int, int]]], session_count: int, limits: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_scenario(Path(tmp) / "helmr.db", plans, session_count, limits))


# Fewer and shorter: each append is a round trip to a server, and appends to one
# Session wait on its row lock.
@pytest.mark.timeout(120)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=_plans(80), session_count=session_counts, limits=page_limits)
def test_concurrent_appends_are_paged_without_skips_or_repeats_on_postgresql(
    postgres_server: PostgresServer,
    plans: list[list[tuple[int, int]]],
    session_count: int,
    limits: list[int],
) -> None:
    with postgres_server.database() as url:
        asyncio.run(_scenario(url, plans, session_count, limits))
