"""What the benchmarked control plane does per Turn: HTTP requests by route, store
transactions, SQL statements and commits, CPU seconds of the event loop's thread
against the whole process (the rest is the store's threads), and the cyclic garbage
collector's collections and the time they held the process.

``_scale_plane.py`` installs the counters in its process (:func:`install`) and answers
them at ``GET /bench/counts``; ``bench_scale.py`` reads them before and after the
load and prints the difference per Turn (:func:`per_turn`). Statements are counted
by wrapping each transaction's connection, so only the store's own statements are
seen: each transaction's ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` (and SQLite's
savepoint per job) come on top, and a SQLite commit is one per batch of writes.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from helmr.store import Store, tx, writer

COUNTS_ROUTE = "/bench/counts"


class _CountingConnection:
    """A transaction's connection that counts each statement by its first word."""

    __slots__ = ("_conn", "_counts")

    def __init__(self, conn: Any, counts: Counter[str]) -> None:
        self._conn = conn
        self._counts = counts

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self._counts["statements"] += 1
        self._counts[f"statements {sql.split(None, 1)[0].lower()}"] += 1
        return self._conn.execute(sql, parameters)


def install(app: web.Application, store: Store) -> None:
    """Counts from now on what this process's store and ``app`` do."""
    counts: Counter[str] = Counter()
    read_tx_init = tx.ReadTx.__init__

    def counted_init(self: tx.ReadTx, conn: Any, dialect: Any, now: Any) -> None:
        read_tx_init(self, _CountingConnection(conn, counts), dialect, now)

    tx.ReadTx.__init__ = counted_init  # type: ignore[method-assign]

    sqlite_commit = writer.Writer._commit

    def counted_commit(self: writer.Writer, batch: list[Any]) -> Any:
        counts["sqlite commits"] += 1
        return sqlite_commit(self, batch)

    writer.Writer._commit = counted_commit  # type: ignore[method-assign]

    def observe(kind: str, lane: str, seconds: float) -> None:
        counts[f"{kind} transactions"] += 1

    store.observe = observe

    began, paused = [0.0], [0.0]

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
            return
        counts[f"gc collections, generation {info['generation']}"] += 1
        paused[0] += time.perf_counter() - began[0]

    gc.callbacks.append(collected)

    @web.middleware
    async def count_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
        name = request.match_info.route.name  # Helmr's routes: the bench's own are unnamed
        if name is not None:
            counts[f"http {name}"] += 1
        return await handler(request)

    app.middlewares.insert(0, count_requests)

    async def answer(_: web.Request) -> web.Response:
        # Called on the event loop's thread: thread_time is that thread's CPU.
        cpu = {"cpu s, process": time.process_time(), "cpu s, event loop": time.thread_time()}
        return web.json_response({**counts, **cpu, "gc s, pauses": paused[0]})

    app.router.add_get(COUNTS_ROUTE, answer)


def per_turn(before: dict[str, float], after: dict[str, float], turns: int) -> Iterator[str]:
    """Lines of what each Turn cost between two readings."""
    for name in sorted(after):
        spent = after[name] - before.get(name, 0)
        if not spent:
            continue
        scale, unit = (1000, " ms") if name.startswith(("cpu", "gc s")) else (1, "")
        yield f"  {name}: {spent * scale / max(turns, 1):.2f}{unit} per turn"
