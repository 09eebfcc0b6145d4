"""API read latency and enqueue throughput over HTTP, beside the store's own read.

In one run, on a fresh SQLite store in a temporary directory:

- fills one session with ``--events`` events (default 100 000; output
  records of a realistic size, appended in large transactions);
- serves the real app (``build_app`` over ``Control``) on loopback and reads
  ``--samples`` full pages of 1000 events at random cursors over HTTP
  (``GET /v1/sessions/{id}/events?after=&limit=1000``, timed until the whole
  body has arrived), and the same cursors straight from ``Control.list_events``
  (the store-level read the route makes); prints p50/p99 of both and their ratio;
- enqueues ``--enqueues`` turns through ``POST /v1/sessions/{id}/turns`` from
  ``--concurrency`` concurrent clients and prints the throughput.

Client and server share this process and its event loop, so the HTTP figures
include the client's side too. Figures are printed, never asserted.

    .venv/bin/python benchmarks/bench_api.py [--events 100000] [--samples 300]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from helmr.control.control import Control
from helmr.events import EventKind
from helmr.protocol import api_routes as routes
from helmr.protocol.api_requests import MAX_PAGE, EnqueueBody, EventsQuery
from helmr.server import Grant, User
from helmr.store import Tx, timeline

# The composition the unit tests use (store, Control, app): run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.compose import open_plane, serving, static_app

TOKEN = "bench"
PAGE = MAX_PAGE
BATCH = 5000


def _fill(sid: str, start: int, count: int) -> Callable[[Tx], None]:
    def fill(tx: Tx) -> None:
        for i in range(start, start + count):
            text = f"step {i}: checked the build of module {i % 97}, all green"
            timeline.append(tx, sid, EventKind.TURN_OUTPUT, [{"type": "text", "text": text}])

    return fill


async def _timed(samples: list[int], read: Callable[[int], Awaitable[object]]) -> list[float]:
    took = []
    for after in samples:
        started = time.perf_counter()
        await read(after)
        took.append(time.perf_counter() - started)
    return took


def _percentiles(took: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(took, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def main(events: int, samples: int, enqueues: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_plane(Path(tmp) / "timeline.db") as plane:
            store, control = plane.store, plane.control
            session = await control.open_session(
                namespace="bench", name="bench", actor="bench", workspace="bench"
            )
            sid = session.id
            began = time.perf_counter()
            for start in range(0, events, BATCH):
                await store.write(_fill(sid, start, min(BATCH, events - start)))
            print(f"filled {events} events in {time.perf_counter() - began:.1f} s")

            app = static_app(control, {TOKEN: Grant(User("bench"))})
            async with (
                serving(app) as base,
                aiohttp.ClientSession(
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    connector=aiohttp.TCPConnector(limit=concurrency),
                ) as http,
            ):
                await _reads(http, base, control, sid, events, samples)
                await _enqueues(http, base, sid, enqueues, concurrency)


async def _reads(
    http: aiohttp.ClientSession, base: str, control: Control, sid: str, events: int, samples: int
) -> None:
    cursors = [random.randrange(0, events - PAGE + 1) for _ in range(samples)]

    async def over_http(after: int) -> bytes:
        query = EventsQuery.model_construct(after=after, limit=PAGE).model_dump()
        async with http.get(base + routes.events(sid), params=query) as r:
            r.raise_for_status()
            return await r.read()

    async def from_store(after: int) -> object:
        return await control.list_events(sid, after, PAGE)

    size = len(await over_http(0))
    for warm in (over_http, from_store):  # first-use costs out of the samples
        await _timed(cursors[:10], warm)
    http_p50, http_p99 = _percentiles(await _timed(cursors, over_http))
    store_p50, store_p99 = _percentiles(await _timed(cursors, from_store))
    print(f"1000-event page ({size / 1024:.0f} KiB of JSON), {samples} random cursors:")
    print(f"  over HTTP    p50 {http_p50:7.2f} ms   p99 {http_p99:7.2f} ms")
    print(f"  store read   p50 {store_p50:7.2f} ms   p99 {store_p99:7.2f} ms")
    print(f"  HTTP / store p50 {http_p50 / store_p50:7.2f} x    p99 {http_p99 / store_p99:7.2f} x")


async def _enqueues(
    http: aiohttp.ClientSession, base: str, sid: str, total: int, concurrency: int
) -> None:
    counter = iter(range(total))
    latencies: list[float] = []

    async def client() -> None:
        for n in counter:
            started = time.perf_counter()
            body = EnqueueBody(input={"n": n}, idempotency_key=f"bench-{n}").model_dump()
            async with http.post(base + routes.session_turns(sid), json=body) as r:
                r.raise_for_status()
                await r.read()
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    p50, p99 = _percentiles(latencies)
    print(f"enqueue: {total} turns from {concurrency} concurrent clients in {elapsed:.2f} s")
    print(f"  {total / elapsed:7.0f} turns/s   latency p50 {p50:.2f} ms   p99 {p99:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--enqueues", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.samples, args.enqueues, args.concurrency))
