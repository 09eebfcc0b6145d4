"""A simulated runner fleet and the no-op load that ``bench_scale.py`` puts on a
control plane: one asyncio process plays every Session's runner over the runner
protocol (``receive`` long polls, ``complete`` and its ``next``), while clients enqueue no-op Turns
over the REST API and wait for them.

Shared by the ``fleet`` mode (a control plane of its own, one static runner token)
and the ``kwok`` mode (the real control plane, a pod-bound token per runner pod).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from helmr.protocol import routes
from helmr.protocol.api_routes import session_turns
from helmr.protocol.contract import EPOCH_HEADER, PROTOCOL
from helmr.runner.session import RECEIVE_WINDOW

# As a runner does (helmr.runner.session, helmr.runner.transport): each receive waits
# up to 30 s, and a failed call is retried after 0.1 s, doubling up to 5 s.
RECEIVE_WAIT = RECEIVE_WINDOW
RETRY_FIRST, RETRY_MOST = 0.1, 5.0


class Api(Protocol):
    """A control plane's REST API: where it is and a token it accepts."""

    url: str
    token: str


@dataclass(frozen=True, slots=True)
class Runner:
    """One Session's runner process, as the control plane knows it."""

    epoch: int
    token: str


class Fleet:
    """Every Session's runner: a ``receive`` long poll each, completing what it gets.

    ``protocol``: the runner protocol revision the runners speak (changeable between
    loads); from 3, each ``complete`` carries the next ``receive`` (``next``), and a
    turn it starts is run without a ``receive``; from 5 that ``next`` waits for a turn
    as the ``receive`` would (the reply is held: its head says the settlement
    committed, its body brings the next turn), so a runner whose queue is empty as
    it settles sends no ``receive`` either."""

    def __init__(self, http: aiohttp.ClientSession, url: str, protocol: int = PROTOCOL) -> None:
        self._http = http
        self.urls = [url]
        """The replicas' runner API: a runner calls ``urls[its index % len(urls)]``
        (changeable between loads), as the Service spreads connections."""
        self.protocol = protocol
        self._index: dict[str, int] = {}
        self._runners: dict[str, Runner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.received: dict[str, float] = {}  # turn id -> when its receive answered
        self.completed: dict[str, asyncio.Future[None]] = {}

    @property
    def sessions(self) -> list[str]:
        return list(self._runners)

    def serve(self, session_id: str, runner: Runner) -> None:
        """Plays ``session_id``'s runner from now on (a newer process: with its epoch and token)."""
        self._runners[session_id] = runner
        self._index.setdefault(session_id, len(self._index))
        if session_id not in self._tasks:
            self._tasks[session_id] = asyncio.create_task(self._runner(session_id))

    def waiter(self, turn_id: str) -> asyncio.Future[None]:
        return self.completed.setdefault(turn_id, asyncio.get_running_loop().create_future())

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Fleet]:
        """Plays the runners inside; with what the benchmark made before (the seeded
        Sessions, its modules) frozen out of the collector's scans and its youngest
        generation collected less often, as the control plane's are
        (``helmr.operator.cyclic_gc``). One process plays thousands of runners,
        each a process of its own with a small heap in a real fleet: with the
        collector's defaults, each of this process's collections of its whole heap
        (at 5,000 Sessions, up to 0.86 s, every few seconds under load) held every
        runner and client at once, which the latencies measured took for the
        control plane's."""
        # Imported here: a --before child (bench_turn_cpu.py's) imports this module
        # with an older src, which may not have it; the fleet's process has this one.
        from helmr.operator.cyclic_gc import settle_after_start

        threshold = gc.get_threshold()
        settle_after_start()
        try:
            yield self
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            gc.set_threshold(*threshold)
            gc.unfreeze()

    async def _runner(self, session_id: str) -> None:
        delay = RETRY_FIRST
        given: dict[str, Any] | None = None  # the turn a settlement started
        while True:
            runner = self._runners[session_id]
            headers = {EPOCH_HEADER: str(runner.epoch), "Authorization": f"Bearer {runner.token}"}
            url = self.urls[self._index[session_id] % len(self.urls)]
            try:
                body, given = given, None
                if body is None:
                    async with self._http.post(
                        url + routes.receive(session_id),
                        json={"timeout": RECEIVE_WAIT},
                        headers=headers,
                    ) as answer:
                        if answer.status == 408:
                            continue
                        body = await answer.json()
                turn_id = body["id"]
                self.received[turn_id] = time.monotonic()
                async with self._http.post(
                    url + routes.complete(session_id, turn_id),
                    json=self._settlement(),
                    headers=headers,
                ) as done:
                    done.raise_for_status()
                    # The head: the Turn has completed (a held reply's body comes later).
                    waiter = self.waiter(turn_id)
                    if not waiter.done():
                        waiter.set_result(None)
                    settled: dict[str, Any] = await done.json()
                given = settled.get("next")
                if given is not None and "id" not in given:
                    given = None  # {"closed": true}: not in this benchmark
                delay = RETRY_FIRST
            except (aiohttp.ClientError, KeyError, TimeoutError):
                # The control plane restarting, or too busy to answer within the
                # client's timeout: a real runner asks again, and so does this one
                # (a Turn it took but could not hear of comes back to it).
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MOST)

    def _settlement(self) -> dict[str, Any]:
        """A ``complete``'s body: asking for the next turn from revision 3, waiting for
        it from 5."""
        if self.protocol >= 5:
            return {"next": {"timeout": RECEIVE_WAIT}}
        return {"next": {}} if self.protocol >= 3 else {}


async def enqueue(http: aiohttp.ClientSession, api: Api, session_id: str) -> str:
    async with http.post(
        api.url + session_turns(session_id),
        json={"input": "noop"},
        headers={"Authorization": f"Bearer {api.token}"},
    ) as answer:
        answer.raise_for_status()
        body: dict[str, Any] = await answer.json()
        return str(body["id"])


async def load(
    http: aiohttp.ClientSession,
    api: Api | Sequence[Api],
    fleet: Fleet,
    clients: int,
    seconds: float,
    burst: int = 1,
    rate: float | None = None,
) -> tuple[int, float, list[float]]:
    """``clients`` enqueuers over the Sessions for ``seconds``, each enqueuing ``burst``
    Turns to one Session at once and waiting for them to complete (``burst`` > 1:
    busy runners, with work queued as they settle): the Turns completed, the time
    taken, enqueue -> running. Several APIs (replicas): client n asks the n-th.
    ``rate``: the clients together start at most that many bursts a second (a load
    below what the control plane can take: its work per second, and so the part of
    it that is per second rather than per Turn, is the same for any code compared)."""
    apis = list(api) if isinstance(api, Sequence) else [api]
    ids = fleet.sessions
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    next_start = time.monotonic()

    async def paced() -> None:
        nonlocal next_start
        if rate is None:
            return
        now = time.monotonic()
        start, next_start = max(next_start, now), max(next_start, now) + 1 / rate
        await asyncio.sleep(start - now)

    async def client(n: int) -> int:
        done = 0
        i = n
        while time.monotonic() < deadline:
            await paced()
            session_id = ids[i % len(ids)]
            i += clients
            sent = time.monotonic()
            asked = apis[n % len(apis)]
            turn_ids = [await enqueue(http, asked, session_id) for _ in range(burst)]
            for turn_id in turn_ids:
                await fleet.waiter(turn_id)
                latencies.append(fleet.received[turn_id] - sent)
            done += burst
        return done

    began = time.monotonic()
    done = sum(await asyncio.gather(*(client(n) for n in range(min(clients, len(ids))))))
    return done, time.monotonic() - began, latencies


async def ready_after_restart(
    http: aiohttp.ClientSession, api: Api, fleet: Fleet, restart: Callable[[], None]
) -> tuple[float, float]:
    """``restart`` (SIGKILL, start again, in a thread: it may block): seconds until
    the API admits a Turn, and until that Turn completed (its runner, backing off
    like the others, is back)."""
    began = time.monotonic()
    await asyncio.to_thread(restart)
    while True:
        try:
            turn_id = await enqueue(http, api, fleet.sessions[0])
            break
        except aiohttp.ClientConnectionError:
            continue  # a pooled connection to the killed process
        except aiohttp.ClientResponseError as exc:
            if exc.status < 500:
                raise
            await asyncio.sleep(0.05)  # serving, not yet ready
    admitted = time.monotonic() - began
    await asyncio.wait_for(fleet.waiter(turn_id), 120)
    return admitted, time.monotonic() - began
