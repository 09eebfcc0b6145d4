"""Timeline store figures: append throughput and page read latency.

    .venv/bin/python benchmarks/bench_store.py [--appends 20000] [--events 100000]

Prints append throughput with one writer and with four concurrent writers
(each append is its own acknowledged transaction; concurrent ones share
group commits), then the p50/p99 latency of reading a 1000-event page from
a store of ``--events`` events through ``Store.page`` and, measured in the
same run on the same rows, through a bare ``SELECT`` on a plain connection.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from pydantic import JsonValue

from helmr.events import EventKind
from helmr.store import Store, Tx, timeline

# The unit tests' way to add a Session row: run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.compose import new_session

PAGE = 1000
READS = 300
PAYLOAD: JsonValue = [{"type": "text", "text": "Checking the build: step 42 of 100 passed"}]


async def _append_rate(store: Store, writers: int, total: int) -> float:
    """Events per second, each append awaited before its writer sends the next."""
    session_ids = [
        await new_session(store, f"w{writers}-{n}", namespace="bench") for n in range(writers)
    ]

    async def writer(session_id: str) -> None:
        for _ in range(total // writers):
            await store.append_event(session_id, EventKind.TURN_OUTPUT, PAYLOAD)

    started = time.perf_counter()
    await asyncio.gather(*(writer(sid) for sid in session_ids))
    return total / (time.perf_counter() - started)


def _append_many(tx: Tx, session_id: str, count: int) -> None:
    for _ in range(count):
        timeline.append(tx, session_id, EventKind.TURN_OUTPUT, PAYLOAD)


async def _fill(store: Store, events: int) -> str:
    session_id = await new_session(store, "big", namespace="bench")
    for _ in range(events // PAGE):
        await store.write(partial(_append_many, session_id=session_id, count=PAGE))
    return session_id


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _page_latency(store: Store, path: Path, session_id: str, events: int) -> None:
    bare = sqlite3.connect(path)
    query = (
        "SELECT id, session_id, turn_id, sequence, created_at, kind, data, epoch FROM events"
        " WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?"
    )
    page_ms: list[float] = []
    select_ms: list[float] = []
    rng = random.Random(7)
    for _ in range(READS):
        after = rng.randrange(0, events - PAGE)
        started = time.perf_counter()
        await store.page(session_id, after, PAGE)
        page_ms.append(_ms_since(started))
        started = time.perf_counter()
        bare.execute(query, (session_id, after, PAGE + 1)).fetchall()
        select_ms.append(_ms_since(started))
    bare.close()
    page_p50, page_p99 = _percentiles(page_ms)
    select_p50, select_p99 = _percentiles(select_ms)
    print(f"page of {PAGE} over {events} events, {READS} reads at random cursors:")
    print(f"  Store.page    p50 {page_p50:7.2f} ms   p99 {page_p99:7.2f} ms")
    print(f"  bare SELECT   p50 {select_p50:7.2f} ms   p99 {select_p99:7.2f} ms")
    print(
        f"  ratio page/SELECT   p50 {page_p50 / select_p50:.1f}x   p99 {page_p99 / select_p99:.1f}x"
    )


async def main(appends: int, events: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        async with await Store.open(path) as store:
            for writers in (1, 4):
                rate = await _append_rate(store, writers, appends)
                print(f"append, {writers} writer(s), {appends} events: {rate:,.0f} events/s")
        path = Path(tmp) / "bench-read.db"
        async with await Store.open(path) as store:
            session_id = await _fill(store, events)
            await _page_latency(store, path, session_id, events)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    asyncio.run(main(args.appends, args.events))
