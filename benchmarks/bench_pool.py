"""Warm pools against a real cluster: a new Session's start → its first ``turn.running``
when it adopts a pooled runner pod, against the cold path (a fresh claim and a new pod),
in one run; and the apiserver's writes per start, counted by the apiserver.

Starts a real control plane (``kopf run -m helmr.operator``) and two Actors of the
``files`` test actor (tests/actors/files.py) on the same image and disk size: ``pooled``
with ``warmPool.size`` = ``--pool``, ``cold`` without. Measured, in one run:

  - one at a time (``--samples`` of each, alternating, the pool refilled before each
    pooled sample): start → the first turn's ``turn.running``;
  - a burst: ``--pool`` starts at ``--rate`` per second against a full pool, then as
    many cold ones at the same rate; each start → its first ``turn.running``;
  - apiserver writes (POST, PUT, PATCH, DELETE on Helmr's resources, pods, claims,
    service accounts, Events) per start, over the one-at-a-time samples of each kind
    (a pooled sample's window includes its pool's refill: a pod and a claim made).

Every timestamp is this host's wall clock; figures are printed, never asserted.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_pool.py [--samples 5] [--pool 5] [--rate 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _apiserver_writes
from _apiserver_writes import helmr_writes
from _common import Table, bench_namespace, control_plane, first, new_api_client, prepare
from kubernetes import client
from tests.cluster import conftest
from tests.cluster.sessions import all_events, create_actor

from helmr.client import Client
from helmr.resources import ACTORS, GROUP, VERSION

DISK = "64Mi"
LONG = 300.0
POOLED, COLD = "pooled", "cold"

# Claims are what a pool adds to Helmr's writes: counted too.
_apiserver_writes.CORE_RESOURCES |= {"persistentvolumeclaims"}


async def pool_full(api: client.ApiClient, namespace: str, size: int) -> None:
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        actor: Any = await asyncio.to_thread(
            custom.get_namespaced_custom_object, GROUP, VERSION, namespace, ACTORS, POOLED
        )
        pool = (actor.get("status") or {}).get("warmPool") or {}
        if pool.get("ready") == size:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"the pool did not refill to {size} in {LONG} s")


async def start_to_running(helmr: Client, namespace: str, actor: str, workspace: str) -> float:
    """A new Session's start → its first turn's ``turn.running`` (the turn enqueued at once)."""
    started = time.time()
    session, _ = await helmr.actors.start(actor, namespace=namespace, workspace=workspace)
    turn = await session.enqueue({"read": []})
    assert (await turn.wait(timeout=LONG)).status == "completed"
    running = first(await all_events(session), "turn.running", turn.id) - started
    await session.cancel()
    return running


async def one_at_a_time(
    helmr: Client, api: client.ApiClient, kubeconfig: str, namespace: str, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, Counter[str]]]:
    times: dict[str, list[float]] = {POOLED: [], COLD: []}
    writes: dict[str, Counter[str]] = {POOLED: Counter(), COLD: Counter()}
    for i in range(args.samples):
        for kind in (POOLED, COLD):
            await pool_full(api, namespace, args.pool)  # the refill is in the pooled window
            before = helmr_writes(kubeconfig)
            times[kind].append(await start_to_running(helmr, namespace, kind, f"{kind}-{i}"))
            if kind == POOLED:
                await pool_full(api, namespace, args.pool)
            writes[kind] += helmr_writes(kubeconfig) - before
    return times, writes


async def burst_start(helmr: Client, namespace: str, kind: str, n: int) -> float:
    return await start_to_running(helmr, namespace, kind, f"b-{kind}-{n}")


async def paced(count: int, rate: float, start: Callable[[int], Awaitable[float]]) -> list[float]:
    """``count`` starts, one every 1/``rate`` s, each measured to its ``turn.running``."""

    async def at(n: int) -> float:
        await asyncio.sleep(n / rate)
        return await start(n)

    return list(await asyncio.gather(*(at(n) for n in range(count))))


async def bench(args: argparse.Namespace) -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    prepare(kubeconfig, args.build)
    image = conftest.RUNNER_IMAGE
    api = new_api_client(kubeconfig)
    core = client.CoreV1Api(api)
    load = os.getloadavg()
    with control_plane(kubeconfig) as op, bench_namespace(core) as namespace:
        common: dict[str, Any] = {"entrypoint": "files:files", "computer": {"size": DISK}}
        create_actor(api, namespace, image, POOLED, warmPool={"size": args.pool}, **common)
        create_actor(api, namespace, image, COLD, **common)
        async with Client(op.url, op.token) as helmr:
            print(f"one at a time: {args.samples} of each ...", flush=True)
            single, writes = await one_at_a_time(helmr, api, kubeconfig, namespace, args)
            burst: dict[str, list[float]] = {}
            for kind in (POOLED, COLD):
                await pool_full(api, namespace, args.pool)
                print(f"burst: {args.pool} {kind} starts at {args.rate}/s ...", flush=True)
                burst[kind] = await paced(
                    args.pool, args.rate, partial(burst_start, helmr, namespace, kind)
                )
    table = Table()
    table.section(f"new Session start -> first turn.running (claims of {DISK}; load {load})")
    pooled = table.latency("pooled: one at a time", single[POOLED])
    cold = table.latency("cold: one at a time", single[COLD])
    table.ratio("ratio pooled / cold, one at a time", pooled, cold)
    burst_pooled = table.latency(f"pooled: {args.pool} at {args.rate}/s", burst[POOLED])
    burst_cold = table.latency(f"cold: {args.pool} at {args.rate}/s", burst[COLD])
    table.ratio(f"ratio pooled / cold at {args.rate}/s", burst_pooled, burst_cold)
    table.section("apiserver writes per start (the apiserver's count, one at a time)")
    for kind in (POOLED, COLD):
        per_start = sum(writes[kind].values()) / args.samples
        table.rows.append((f"{kind}: writes per start", f"{per_start:.1f}", "", "", ""))
        _apiserver_writes.write_rows(table, writes[kind], Counter())
    print()
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5, help="one-at-a-time starts of each")
    parser.add_argument("--pool", type=int, default=5, help="the pool's size and burst's starts")
    parser.add_argument("--rate", type=float, default=10.0, help="starts per second in a burst")
    parser.add_argument(
        "--no-build", dest="build", action="store_false", help="reuse the imported runner image"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
