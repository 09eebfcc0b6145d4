"""Reads asked together share one transaction (``helmr.store.read_batches``), and
each caller still gets its own answer: its value, its own exception, the
database error its function caused, or the outage that failed them all."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helmr.errors import NotFound, Unavailable
from helmr.store import ReadTx, Store
from helmr.store.read_batches import LIMIT, ReadBatches
from tests.compose import new_session


class DatabaseError(Exception):
    pass


class Transactions:
    """A backend's read, counted: each call is one transaction."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.count = 0
        self.fail = fail

    async def __call__(self, fn: Callable[[ReadTx], Any]) -> Any:
        self.count += 1
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        return fn(None)  # type: ignore[arg-type]  # these functions read nothing


def value(n: int) -> Callable[[ReadTx], int]:
    return lambda rt: n


def raising(error: Exception) -> Callable[[ReadTx], int]:
    def fn(rt: ReadTx) -> int:
        raise error

    return fn


async def test_reads_asked_together_share_a_transaction() -> None:
    run = Transactions()
    batches = ReadBatches(run, (DatabaseError,))
    asked = LIMIT + 3
    assert await asyncio.gather(*(batches.read(value(n)) for n in range(asked))) == list(
        range(asked)
    )
    assert run.count == 2  # LIMIT in one, the rest in another
    assert await batches.read(value(7)) == 7
    assert run.count == 3


@pytest.mark.parametrize(
    ("error", "transactions"),
    [
        (NotFound("ses_x"), 1),  # its own: the batch goes on
        (DatabaseError("bad statement"), 1 + 3),  # may spoil the snapshot: each alone
    ],
)
async def test_an_error_reaches_only_the_caller_whose_read_raised_it(
    error: Exception, transactions: int
) -> None:
    run = Transactions()
    batches = ReadBatches(run, (DatabaseError,))
    results = await asyncio.gather(
        batches.read(value(1)),
        batches.read(raising(error)),
        batches.read(value(3)),
        return_exceptions=True,
    )
    assert [results[0], results[2]] == [1, 3]
    assert results[1] is error
    assert run.count == transactions


async def test_a_failed_transaction_fails_every_caller_once() -> None:
    run = Transactions(fail=Unavailable("the store cannot be reached now"))
    batches = ReadBatches(run, (DatabaseError,))
    results = await asyncio.gather(
        *(batches.read(value(n)) for n in range(3)), return_exceptions=True
    )
    assert all(isinstance(result, Unavailable) for result in results)
    assert run.count == 1


async def test_a_caller_that_stops_waiting_leaves_the_others_their_answers() -> None:
    run = Transactions()
    batches = ReadBatches(run, (DatabaseError,))
    gone = asyncio.ensure_future(batches.read(value(1)))
    kept = asyncio.ensure_future(batches.read(value(2)))
    await asyncio.sleep(0)
    gone.cancel()
    assert await kept == 2
    assert gone.cancelled()


def _failing_statement(rt: ReadTx) -> None:
    rt.conn.execute("SELECT no_such_column FROM sessions")


async def test_on_a_real_store_a_failing_statement_spoils_no_other_read(
    store_location: str | Path,
) -> None:
    """PostgreSQL aborts the whole transaction at its first error: the reads asked
    with the failing one still get their Sessions."""
    async with await Store.open(store_location) as store:
        ids = [await new_session(store, f"s{n}") for n in range(4)]

        def name(session_id: str) -> Callable[[ReadTx], str]:
            return lambda rt: str(
                rt.conn.execute("SELECT name FROM sessions WHERE id = ?", (session_id,)).fetchone()[
                    0
                ]
            )

        asked = [store.read(name(ids[0])), store.read(_failing_statement)]
        asked += [store.read(name(session_id)) for session_id in ids[1:]]
        results = await asyncio.gather(*asked, return_exceptions=True)
        assert results[0] == "s0"
        assert isinstance(results[1], Exception)
        assert not isinstance(results[1], (NotFound, AssertionError))
        assert results[2:] == ["s1", "s2", "s3"]
        with pytest.raises(type(results[1])):
            await store.read(_failing_statement)
