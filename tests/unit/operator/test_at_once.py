"""Steps of many objects, a few under way at a time (helmr.operator.at_once)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from functools import partial

from helmr.operator.at_once import each_at_once


async def test_every_step_runs_with_at_most_the_limit_under_way_and_taken_as_each_starts() -> None:
    under_way, most, taken = 0, 0, 0
    ran: list[int] = []

    def steps() -> Iterator[Callable[[], Awaitable[None]]]:
        nonlocal taken
        for n in range(50):
            taken += 1
            # Taken only as a worker is free: never more than the limit ahead.
            assert taken - len(ran) <= 4
            yield partial(step, n)

    async def step(n: int) -> None:
        nonlocal under_way, most
        under_way += 1
        most = max(most, under_way)
        await asyncio.sleep(0.001 * (n % 3))
        under_way -= 1
        ran.append(n)

    await each_at_once(4, steps())
    assert sorted(ran) == list(range(50))
    assert most == 4


async def test_fewer_steps_than_the_limit_and_none() -> None:
    ran: list[int] = []

    async def step(n: int) -> None:
        ran.append(n)

    await each_at_once(8, [lambda: step(1), lambda: step(2)])
    await each_at_once(8, [])
    assert sorted(ran) == [1, 2]
