"""Timeline store figures, per backend: transaction rates and page read latency.

    .venv/bin/python benchmarks/bench_store.py [--backend sqlite|postgresql]
        [--appends 20000] [--events 100000]

For each backend (both by default; PostgreSQL is a throwaway server from
Debian's packages with its durable defaults, fsync on every commit, started
like the tests' in tests/postgres.py), prints:

- no-op transactions per second through ``Store.write`` (the store's own
  cost: queueing, threads, BEGIN/COMMIT), one caller at a time and 16 at once;
- no-op reads per second through ``Store.read``, 1, 16 and 256 callers at once
  (reads asked together share a transaction: ``helmr.store.read_batches``);
- append throughput with one writer and with four concurrent writers (each
  append is its own acknowledged transaction);
- the p50/p99 latency of reading a 1000-event page from a store of
  ``--events`` events through ``Store.page`` and, in the same run on the same
  rows, through a bare ``SELECT`` on a plain connection.
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
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import psycopg
from pydantic import JsonValue

from helmr.events import EventKind
from helmr.store import ReadTx, Store, Tx, timeline
from helmr.store.dialect import POSTGRES
from helmr.store.store import is_postgres

# The unit tests' way to add a Session row, and their PostgreSQL server: run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.compose import new_session
from tests.postgres import find_binaries, start

BACKENDS = ("sqlite", "postgresql")
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


BARE_PAGE = (
    "SELECT id, session_id, turn_id, sequence, created_at, kind, data, epoch FROM events"
    " WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?"
)


def _bare_select(location: str | Path) -> Callable[[tuple[object, ...]], object]:
    """The page's rows through a plain connection of the backend's own driver."""
    if is_postgres(location):
        conn = psycopg.connect(str(location), autocommit=True)
        query = POSTGRES.statement(BARE_PAGE)
        return lambda args: conn.execute(query, args).fetchall()
    bare = sqlite3.connect(location)
    return lambda args: bare.execute(BARE_PAGE, args).fetchall()


async def _page_latency(store: Store, location: str | Path, session_id: str, events: int) -> None:
    select = _bare_select(location)
    page_ms: list[float] = []
    select_ms: list[float] = []
    rng = random.Random(7)
    for _ in range(READS):
        after = rng.randrange(0, events - PAGE)
        started = time.perf_counter()
        await store.page(session_id, after, PAGE)
        page_ms.append(_ms_since(started))
        started = time.perf_counter()
        select((session_id, after, PAGE + 1))
        select_ms.append(_ms_since(started))
    page_p50, page_p99 = _percentiles(page_ms)
    select_p50, select_p99 = _percentiles(select_ms)
    print(f"  page of {PAGE} over {events} events, {READS} reads at random cursors:")
    print(f"    Store.page    p50 {page_p50:7.2f} ms   p99 {page_p99:7.2f} ms")
    print(f"    bare SELECT   p50 {select_p50:7.2f} ms   p99 {select_p99:7.2f} ms")
    print(
        f"    ratio page/SELECT   p50 {page_p50 / select_p50:.1f}x"
        f"   p99 {page_p99 / select_p99:.1f}x"
    )


def _nothing(tx: ReadTx) -> None:
    pass


async def _noop_rate(
    transaction: Callable[[Callable[[ReadTx], None]], Awaitable[None]], callers: int, total: int
) -> float:
    """No-op transactions (or reads) per second, each awaited before its caller sends the next."""

    async def caller() -> None:
        for _ in range(total // callers):
            await transaction(_nothing)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return total / (time.perf_counter() - started)


@contextmanager
def _locations(backend: str, tmp: Path) -> Iterator[tuple[str | Path, str | Path]]:
    """Two new stores' locations on ``backend``: one for rates, one for reads."""
    if backend == "sqlite":
        yield tmp / "bench.db", tmp / "bench-read.db"
        return
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("PostgreSQL is not installed: hack/install-deps.sh installs it")
    server = start(binaries, durable=True)
    try:
        with server.database(migrated=False) as rates, server.database(migrated=False) as reads:
            yield rates, reads
    finally:
        server.stop()


async def bench(backend: str, appends: int, events: int) -> None:
    print(f"{backend}:")
    with tempfile.TemporaryDirectory() as tmp, _locations(backend, Path(tmp)) as (rates, reads):
        async with await Store.open(rates) as store:
            for callers in (1, 16):
                rate = await _noop_rate(store.write, callers, appends // 4)
                print(f"  no-op write, {callers} caller(s): {rate:,.0f} transactions/s")
            for callers in (1, 16, 256):
                rate = await _noop_rate(store.read, callers, appends)
                print(f"  no-op read, {callers} caller(s): {rate:,.0f} reads/s")
            for writers in (1, 4):
                rate = await _append_rate(store, writers, appends)
                print(f"  append, {writers} writer(s), {appends} events: {rate:,.0f} events/s")
        async with await Store.open(reads) as store:
            session_id = await _fill(store, events)
            await _page_latency(store, reads, session_id, events)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, action="append")
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    for backend in args.backend or BACKENDS:
        asyncio.run(bench(backend, args.appends, args.events))
