"""SQLite's single writer: one thread, one connection, group commit.

Writes are functions of a :class:`~helmr.store.tx.Tx` queued from the event
loop. The thread takes every job waiting, runs each inside its own
savepoint (a job that raises is rolled back alone and gets its exception; a
job that came alone needs none), commits them together, and only then
resolves their futures and wakes the Sessions they touched (each job's apart, in
commit order: a waiter counts its own write's wake-up apart from another write's to
its Session, ``Wakeup.set_last``). An acknowledged
write is therefore committed, and one fsync-free commit serves many
concurrent writers.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from helmr.store.dialect import SQLITE
from helmr.store.tx import Tx

T = TypeVar("T")

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class _Job(Generic[T]):
    fn: Callable[[Tx], T]
    future: asyncio.Future[T]


@dataclass(frozen=True, slots=True)
class _Outcome:
    job: _Job[Any]
    value: object = None
    error: BaseException | None = None
    touched: Iterable[str] = ()
    queues: Mapping[str, bool] | None = None


class Writer:
    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
        publish: Callable[[Iterable[str], Mapping[str, bool]], None],
        max_batch: int = 512,
    ) -> None:
        self._conn = conn
        self._clock = clock
        self._loop = loop
        self._publish = publish
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="helmr-store-writer", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[Tx], T]) -> asyncio.Future[T]:
        """Queues a write; call from the store's event loop."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._queue.put(_Job(fn, future))
        return future

    def stop(self) -> None:
        """Commits what is queued, then ends the thread (blocking)."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            batch = [job]
            stopping = False
            while len(batch) < self._max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            outcomes = self._commit(batch)
            self._loop.call_soon_threadsafe(self._deliver, outcomes)
            if stopping:
                return

    def _commit(self, batch: list[_Job[Any]]) -> list[_Outcome]:
        outcomes: list[_Outcome] = []
        # A job alone needs no savepoint: if it raises, the transaction is rolled
        # back whole (two statements fewer per write when writes come one at a time).
        alone = len(batch) == 1
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                if not alone:
                    self._conn.execute("SAVEPOINT job")
                try:
                    tx = Tx(self._conn, SQLITE, self._clock())
                    value = job.fn(tx)
                except Exception as exc:
                    if not alone:
                        self._conn.execute("ROLLBACK TO job")
                        self._conn.execute("RELEASE job")
                    outcomes.append(_Outcome(job, error=exc))
                else:
                    if not alone:
                        self._conn.execute("RELEASE job")
                    outcomes.append(_Outcome(job, value, None, tx.touched, tx.queues))
            failed_alone = alone and outcomes[0].error is not None
            self._conn.execute("ROLLBACK" if failed_alone else "COMMIT")
        except sqlite3.Error as exc:
            # The transaction itself failed (I/O, disk full, a lost savepoint):
            # nothing of the batch is committed, so no job may be acknowledged.
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            return [_Outcome(job, error=exc) for job in batch]
        return outcomes

    def _deliver(self, outcomes: list[_Outcome]) -> None:
        for outcome in outcomes:  # in commit order: a later job's queue change wins
            if outcome.error is None:
                self._publish(outcome.touched, outcome.queues or {})
        for outcome in outcomes:
            future = outcome.job.future
            if future.done():  # the caller stopped waiting; the write stands
                continue
            if outcome.error is not None:
                future.set_exception(outcome.error)
            else:
                future.set_result(outcome.value)
