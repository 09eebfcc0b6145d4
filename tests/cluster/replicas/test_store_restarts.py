"""The PostgreSQL server restarted mid-turn under 2 control-plane replicas (issue 11,
item 4), the chart installed with helm as for test_leader_kills (release.py).

The server (durable: fsync on each commit, as a real one) is restarted four
times while a Turn runs: ``pg_ctl restart -m fast`` (a clean shutdown), ``-m
immediate`` (a crash: the server recovers from its WAL at start), fast again,
and a crash after which it stays down for longer than the store waits for a
connection (so the API must answer meanwhile: 503 with Retry-After).
Meanwhile clients keep at the API through the apiserver's Service proxy: a
probe reads the session every 200 ms, a writer enqueues a Turn every 300 ms
(each under its idempotency key, repeated until acknowledged), a follower
streams the session's events, and each running Turn is long-polled
(``wait``). Checked: every Turn completes once (no Turn lost, none run twice:
one ``turn.running`` each), never two runner pods; every write acknowledged
before a restart is there after it, and nothing else is; Helmr's failures
during an outage are 503s with Retry-After, never another 5xx; the control
plane reconnects by itself (no container restarts, the same leader, Turns
received and waits answered at once through either replica afterwards, which
needs both replicas' LISTEN feeds, and the leader's status mirror writes the
Turns' statuses). Measured (``pytest -s``): each restart's outage, from the
restart to the first write acknowledged after it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from helmr.client import Client, Event, SessionRef, TurnRef
from helmr.errors import Unavailable
from helmr.operator.mirror.custom_resources import turn_cr_name
from helmr.protocol import api_routes
from helmr.resources import GROUP, TURNS, VERSION
from helmr.store.postgres import CONNECT_WAIT
from tests.postgres import PostgresServer

from ..pods import PodHistory
from ..sessions import all_events, create_misbehaving_actor, eventually, operator_watches
from .clients import Answers, Probe, eventually_async, helmr_retrying, turn_status
from .release import Release, control_plane_pods, lease_holder, ready_control_planes

pytestmark = pytest.mark.helm

DOWN = CONNECT_WAIT + 5
RESTARTS = (("fast", 0.0), ("immediate", 0.0), ("fast", 0.0), ("immediate", DOWN))
"""(pg_ctl's shutdown mode, seconds the server stays down): immediate is a crash."""
TURN_SECONDS = 6.0
WRITE_INTERVAL = 0.3
BACKLOG = 20
AFTERWARDS = 6
"""Turns run one by one after the restarts: each must be received and its wait
answered within QUICK, whichever replica the runner's receive and the wait reach."""
QUICK = 10.0
# The longest a restart may keep the API from acknowledging writes once the server is up.
OUTAGE = 15.0


@dataclass
class Writer:
    """Enqueues a no-op Turn every WRITE_INTERVAL, repeating each (same idempotency
    key) until it is acknowledged; ``acknowledged``: (asked, answered, Turn id) of
    the request that was. It writes only while the session holds fewer than
    BACKLOG queued Turns: on a loaded machine the runner may fall behind, and the
    Actor's queueLimit would refuse the test's own Turns."""

    release: Release
    session_id: str
    answers: Answers = field(default_factory=Answers)
    acknowledged: list[tuple[float, float, str]] = field(default_factory=list)
    stopping: bool = False

    async def run(self) -> None:
        path = self.release.base_url + api_routes.session_turns(self.session_id)
        async with aiohttp.ClientSession(headers=self.release.headers) as http:
            n = 0
            while not self.stopping:
                if await self._queued(http) >= BACKLOG:
                    await asyncio.sleep(WRITE_INTERVAL)
                    continue
                asked = time.monotonic()
                turn_id = await self._enqueue(http, path, n)
                if turn_id is not None:
                    self.acknowledged.append((asked, time.monotonic(), turn_id))
                    n += 1
                await asyncio.sleep(WRITE_INTERVAL)

    async def _enqueue(self, http: aiohttp.ClientSession, path: str, n: int) -> str | None:
        body = {"input": {"write": n}, "idempotency_key": f"write-{n}"}
        try:
            async with http.post(
                path, json=body, ssl=self.release.ssl, timeout=aiohttp.ClientTimeout(total=30)
            ) as response:
                text = await response.text()
                self.answers.sort(response.status, response.headers, text)
                if response.status < 300:
                    turn_id: str = (await response.json())["id"]
                    return turn_id
        except (aiohttp.ClientError, TimeoutError):
            self.answers.unreachable()
        return None

    async def _queued(self, http: aiohttp.ClientSession) -> int:
        """The session's queued Turns; 0 when it cannot tell (then the write is
        tried: during an outage, that is what is measured)."""
        try:
            async with http.get(
                self.release.base_url + api_routes.session(self.session_id),
                ssl=self.release.ssl,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as response:
                text = await response.text()
                self.answers.sort(response.status, response.headers, text)
                if response.status == 200:
                    queued: int = json.loads(text)["queued_turns"]
                    return queued
        except (aiohttp.ClientError, TimeoutError):
            self.answers.unreachable()
        return 0

    def first_acknowledged_after(self, moment: float) -> float | None:
        """When the first request sent after ``moment`` was acknowledged."""
        return next((done for asked, done, _ in self.acknowledged if asked >= moment), None)


@dataclass
class Follower:
    """Streams the session's events for as long as it runs; ``interrupted``: how
    often the SDK's stream gave up (Helmr answered 503 to its reconnection),
    after which it follows again from the last record it had."""

    session: SessionRef
    streamed: list[Event] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            after = self.streamed[-1].sequence if self.streamed else 0
            try:
                async for event in self.session.events.stream(after=after):
                    self.streamed.append(event)
            except (Unavailable, aiohttp.ClientError, TimeoutError) as exc:
                self.interrupted.append(repr(exc))
                await asyncio.sleep(0.5)


def restart(server: PostgresServer, mode: str, down: float) -> None:
    if not down:
        server.restart(mode)
        return
    server.halt(mode)
    time.sleep(down)
    server.resume()


def container_restarts(core: client.CoreV1Api, release: Release) -> dict[str, int]:
    restarts: dict[str, int] = {}
    for pod in control_plane_pods(core, release):
        statuses: list[client.V1ContainerStatus] = pod.status.container_statuses or []
        restarts[str(pod.metadata.name)] = sum(int(c.restart_count) for c in statuses)
    return restarts


def mirrored_phase(api_client: client.ApiClient, release: Release, turn: TurnRef) -> str | None:
    """The phase the leader's status mirror wrote on the Turn's resource."""
    cr: dict[str, Any] = client.CustomObjectsApi(api_client).get_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, release.namespace, TURNS, turn_cr_name(turn.id)
    )
    phase: str | None = (cr.get("status") or {}).get("phase")
    return phase


async def test_restarting_the_store_mid_turn_loses_nothing_and_the_api_says_retry_later(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    database: tuple[PostgresServer, str],
    release: Release,
    runner_image: str,
    helmr: Client,
) -> None:
    server = database[0]
    actor = create_misbehaving_actor(api_client, release.namespace, runner_image)
    await operator_watches(api_client, release.namespace, actor)
    await eventually(
        lambda: len(ready_control_planes(core, release)) == 2, timeout=180, what="both replicas"
    )
    history = PodHistory(release.namespace, kubeconfig)
    history.start()
    session, _ = await helmr.actors.start(actor, namespace=release.namespace, workspace="ws")
    restarts_before = container_restarts(core, release)
    leader = lease_holder(api_client, release)
    # A request may wait out the store's wait for a connection, then answer 503.
    probe = Probe(release, api_routes.session(session.id), timeout=CONNECT_WAIT + 5)
    writer = Writer(release, session.id)
    follower = Follower(session)
    clients = [asyncio.create_task(c.run()) for c in (probe, writer, follower)]
    turns: list[TurnRef] = []
    waits: list[asyncio.Task[Any]] = []
    outages: list[float] = []
    downtimes: list[float] = []
    quick: list[float] = []
    try:
        for n, (mode, down) in enumerate(RESTARTS):
            turn = await helmr_retrying(
                lambda n=n: session.enqueue(
                    {"sleep": TURN_SECONDS, "n": n}, idempotency_key=f"sleep-{n}"
                )
            )
            turns.append(turn)
            await eventually_async(
                lambda t=turn: turn_status(t, "running"), timeout=120, what=f"turn {n} running"
            )
            # A client long-polling the running Turn across the restart.
            waits.append(asyncio.create_task(helmr_retrying(lambda t=turn: t.wait(timeout=120))))
            began = time.monotonic()
            await asyncio.to_thread(restart, server, mode, down)
            downtimes.append(time.monotonic() - began)
            await eventually(
                lambda b=began: writer.first_acknowledged_after(b) is not None,
                timeout=OUTAGE * 4 + down,
                what=f"a write acknowledged after restart {n} ({mode})",
            )
            acknowledged_at = writer.first_acknowledged_after(began)
            assert acknowledged_at is not None
            outages.append(acknowledged_at - began)
        results = [await wait for wait in waits]
        # The runner idle in its receive, so that only the change feed can wake it.
        writer.stopping = True
        await asyncio.wait_for(clients[1], timeout=60)
        last_write = session.turn(writer.acknowledged[-1][2])
        await eventually_async(
            lambda: turn_status(last_write, "completed"), timeout=120, what="the writes run"
        )
        for n in range(AFTERWARDS):
            asked = time.monotonic()
            turn = await session.enqueue({"after": n}, idempotency_key=f"after-{n}")
            turns.append(turn)
            result = await turn.wait(timeout=QUICK * 3)
            quick.append(time.monotonic() - asked)
            results.append(result)
    finally:
        for task in clients:
            task.cancel()
        await asyncio.wait(clients)
        history.stop()
    print(
        f"restarts {list(RESTARTS)}: pg_ctl took {[round(d, 1) for d in downtimes]} s, "
        f"restart -> first acknowledged write {[round(o, 1) for o in outages]} s; "
        f"after them, enqueue -> completed {[round(q, 1) for q in quick]} s; "
        f"probe: {probe.answers}; writer: {writer.answers}, "
        f"{len(writer.acknowledged)} writes acknowledged; "
        f"stream interrupted {len(follower.interrupted)} times {follower.interrupted[:3]}"
    )
    # No Turn lost, each with its result; none ran twice; never two runner pods.
    expected = [{"echo": {"sleep": TURN_SECONDS, "n": n}} for n in range(len(RESTARTS))]
    expected += [{"echo": {"after": n}} for n in range(AFTERWARDS)]
    assert [r.status for r in results] == ["completed"] * len(expected), results
    assert [r.result for r in results] == expected
    acknowledged = [turn_id for _, _, turn_id in writer.acknowledged]
    events = await all_events(session)
    queued = [str(e.turn_id) for e in events if e.kind == "turn.queued"]
    running = [str(e.turn_id) for e in events if e.kind == "turn.running"]
    completed = [str(e.turn_id) for e in events if e.kind == "turn.completed"]
    # Every acknowledged write is there, once; nothing unacknowledged was admitted.
    assert sorted(queued) == sorted(acknowledged + [t.id for t in turns])
    assert sorted(running) == sorted(queued), "a Turn ran twice, or not at all"
    assert sorted(completed) == sorted(queued)
    assert max(history.counts) == 1, history.counts
    # Streamed: every event up to the stream's last, in order, none skipped or repeated.
    assert follower.streamed == events[: len(follower.streamed)]
    assert len(follower.streamed) > len(events) // 2
    # During the outages Helmr said "retry later", never a bare 5xx.
    assert not probe.answers.helmr_5xx, probe.answers.helmr_5xx
    assert not writer.answers.helmr_5xx, writer.answers.helmr_5xx
    assert not writer.answers.refused, writer.answers.refused
    assert max(o - d for o, (_, d) in zip(outages, RESTARTS, strict=True)) < OUTAGE, outages
    # The long outage was answered: Helmr told the probe (a read every 0.2 s, each
    # waiting at most the store's 5 s for a connection) to retry later. Not asserted
    # of the writer: whether one of its requests (each up to 5 s) falls wholly
    # inside the 10 s outage depends on where in its loop the outage began.
    assert probe.answers.retry_later
    # The control plane reconnected by itself: no restarts, the same leader...
    assert container_restarts(core, release) == restarts_before
    assert lease_holder(api_client, release) == leader
    # ... its change feeds wake the runner's receive and the waits at once (a replica
    # deaf to the other's commits holds them to their timeouts: 30 s) ...
    assert max(quick) < QUICK, quick
    # ... and the leader's status mirror writes the Turns' ends.
    for turn in turns:
        await eventually(
            lambda t=turn: mirrored_phase(api_client, release, t) == "completed",
            timeout=60,
            what=f"{turn.id}'s status mirrored",
        )
