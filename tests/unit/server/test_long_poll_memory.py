"""What an idle runner's waiting ``receive`` keeps in the control plane (issue 31: at
5,000 idle Sessions each keeps one for minutes). Counted by type while N wait: none
of the objects Helmr's layers used to keep per waiter (an ``asyncio.Event``, context
managers, partials, the parsed inputs), only aiohttp's request and the store's watch.
``benchmarks/bench_long_poll_memory.py`` measures the bytes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
from collections import Counter

from helmr.protocol import routes
from helmr.protocol.api_requests import RunnerHeaders, SessionPath
from helmr.protocol.models import ReceiveRequest
from tests.unit.api import Api

WAITING = 20

KEPT_BEFORE = (
    asyncio.Event,
    contextlib._GeneratorContextManager,
    functools.partial,
    SessionPath,
    RunnerHeaders,
    ReceiveRequest,
)


def _alive() -> Counter[str]:
    gc.collect()
    return Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, KEPT_BEFORE))


async def test_a_waiting_receive_keeps_none_of_helmrs_per_request_objects(api: Api) -> None:
    sessions = [await api.start(f"ws{n}") for n in range(WAITING)]
    calls = [(sid, await api.runner(sid)) for sid in sessions]
    before = _alive()
    waiting = [
        asyncio.create_task(
            api.call("POST", routes.receive(sid), headers=headers, json={"timeout": 60}, token="")
        )
        for sid, headers in calls
    ]
    try:
        store = api.control._store
        watches, reads = store._signals._watches, store._reads
        async with asyncio.timeout(30):  # bounds a hang only
            # Each waiter watches, and has no read of the store in flight: a read asked
            # holds its function, a partial, until answered (under load, in a full
            # unit run, the 20 waiters' last reads were counted as kept).
            while len(watches) < WAITING or reads._asked or reads._running:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # each has gone on to its wait
        grown = _alive() - before
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
    # Anything kept per waiter would count at least WAITING.
    assert {name: n for name, n in grown.items() if n >= WAITING} == {}
