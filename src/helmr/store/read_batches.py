"""Reads asked together, answered by one transaction: group commit's counterpart.

Every read a caller asks in one turn of the event loop (up to :data:`LIMIT`)
runs in one snapshot, each function getting its own value or exception. The
snapshot begins after the last of them was asked, so each still sees every
write acknowledged before it asked. A read transaction is a hop to a store
thread and back, and on PostgreSQL a ``BEGIN`` and a ``ROLLBACK`` round trip
besides; after a restart thousands of runners' looks and kopf's resumes of
Sessions are asked at once.

A function's own exception (``NotFound``...) is its caller's alone. A database
error may have spoiled the snapshot for the functions after it (PostgreSQL
aborts a transaction at its first error), so it ends the batch, and each of the
batch's functions runs again in a transaction of its own: every error reaches
the caller whose function caused it. A failure of the whole transaction (the
store cannot be reached) is every caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from helmr.store.tx import ReadTx

T = TypeVar("T")

LIMIT = 64
"""Reads in one transaction at most: a batch holds one connection while it runs."""

Run = Callable[[Callable[[ReadTx], Any]], Awaitable[Any]]
"""The backend's read: runs a function on a snapshot in its own transaction."""


@dataclass(frozen=True, slots=True)
class _Read(Generic[T]):
    fn: Callable[[ReadTx], T]
    future: asyncio.Future[T]


class ReadBatches:
    def __init__(self, run: Run, database_errors: tuple[type[Exception], ...]) -> None:
        self._run = run
        self._database_errors = database_errors
        self._asked: list[_Read[Any]] = []
        self._running: set[asyncio.Task[None]] = set()

    async def read(self, fn: Callable[[ReadTx], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._asked:
            loop.call_soon(self._send)
        self._asked.append(_Read(fn, future))
        return await future

    def _send(self) -> None:
        asked, self._asked = self._asked, []
        for start in range(0, len(asked), LIMIT):
            task = asyncio.create_task(self._answer(asked[start : start + LIMIT]))
            self._running.add(task)  # held: the loop keeps only weak references
            task.add_done_callback(self._running.discard)

    async def _answer(self, batch: list[_Read[Any]]) -> None:
        if len(batch) == 1:
            await self._alone(batch[0])
            return
        try:
            outcomes = await self._run(
                _together([read.fn for read in batch], self._database_errors)
            )
        except self._database_errors:
            await asyncio.gather(*(self._alone(read) for read in batch))
            return
        except Exception as exc:  # every caller's, whatever it is
            for read in batch:
                _settle(read.future, error=exc)
            return
        except asyncio.CancelledError:  # the loop is closing: nobody gets an answer
            for read in batch:
                read.future.cancel()
            raise
        for read, (value, error) in zip(batch, outcomes, strict=True):
            _settle(read.future, value, error)

    async def _alone(self, read: _Read[Any]) -> None:
        try:
            value = await self._run(read.fn)
        except Exception as exc:  # its caller's
            _settle(read.future, error=exc)
        except asyncio.CancelledError:
            read.future.cancel()
            raise
        else:
            _settle(read.future, value)


def _together(
    fns: list[Callable[[ReadTx], Any]], database_errors: tuple[type[Exception], ...]
) -> Callable[[ReadTx], list[tuple[Any, Exception | None]]]:
    def run(rt: ReadTx) -> list[tuple[Any, Exception | None]]:
        outcomes: list[tuple[Any, Exception | None]] = []
        for fn in fns:
            try:
                outcomes.append((fn(rt), None))
            except database_errors:
                raise
            except Exception as exc:  # its caller's
                outcomes.append((None, exc))
        return outcomes

    return run


def _settle(
    future: asyncio.Future[Any], value: Any = None, error: BaseException | None = None
) -> None:
    if future.done():  # its caller stopped waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
