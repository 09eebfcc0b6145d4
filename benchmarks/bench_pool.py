"""Warm pools against a real cluster: a new Session's start → its first ``turn.running``
when it adopts a pooled runner pod, against the cold path (a fresh claim and a new pod),
in one run; and the apiserver's writes per start, counted by the apiserver.

Starts a real control plane (``kopf run -m helmr.operator``) and two Actors of the
``files`` test actor (tests/actors/files.py) on the same image and disk size: ``pooled``
with ``warmPool.size`` = ``--pool``, ``cold`` without. Measured, in one run:

  - one at a time (``--samples`` of each, alternating, the pool refilled before each
    pooled sample): start → the first turn's ``turn.running``;
  - a burst: ``--pool`` starts at ``--rate`` per second against a full pool, then as
    many cold ones at the same rate; each start → its first ``turn.running``; a burst's
    Sessions are cancelled after it;
  - a pooled burst at ``--high-rate`` per second: the pool grown to ``--high-pool``
    first, then as many starts (none with 0);
  - apiserver writes (POST, PUT, PATCH, DELETE on Helmr's resources, pods, claims,
    service accounts, Events) per start, over the one-at-a-time samples of each kind
    (a pooled sample's window includes its pool's refill: a pod and a claim made).

Each start is also timed from its Turn's admission (``turn.queued``) to its
``turn.running``: the control plane's share, without the client's two calls; and its
start call alone. With ``--high-pool``, the start call's floor is measured first, with
no control plane running: the two objects a start call makes (a Session's and its
Workspace's) POSTed through the control plane's own Kubernetes client, one pair at a
time and ``--high-pool`` pairs at ``--high-rate``, nothing watching them.
``--before DIR`` runs all of it first against a control plane of the code in ``DIR``
(a checkout, e.g. ``git archive main | tar -x -C DIR``; the runner image is this
checkout's), then against this one, and prints the ratios. Every timestamp is this
host's wall clock; figures are printed, never asserted.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig .venv/bin/python benchmarks/bench_pool.py \\
        [--samples 5] [--pool 5] [--rate 10] [--high-rate 45 --high-pool 45] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _apiserver_writes
from _apiserver_writes import helmr_writes
from _cluster import Cluster, parser, run
from _common import Table, bench_namespace, control_plane, first
from kubernetes import client
from tests.cluster.sessions import all_events, create_actor

from helmr.client import Client, SessionRef
from helmr.kube.client import Kube, load_config
from helmr.operator.disks.manifests import build_workspace
from helmr.resources import ACTORS, GROUP, VERSION, ActorRef, ObjectMeta, Session, SessionSpec

DISK = "64Mi"
LONG = 300.0
POOLED, COLD = "pooled", "cold"
T = TypeVar("T")

# Claims are what a pool adds to Helmr's writes: counted too.
_apiserver_writes.CORE_RESOURCES |= {"persistentvolumeclaims"}


@dataclass(frozen=True)
class Start:
    """One start, in seconds: from the client's start call, and from its Turn's admission,
    to its ``turn.running``; and the start call alone."""

    from_start: float
    from_admission: float
    start_call: float


@dataclass
class Figures:
    """What one control plane measured: starts by measurement, writes by kind."""

    load: list[float] = field(default_factory=list)
    starts: dict[str, list[Start]] = field(default_factory=dict)
    writes: dict[str, Counter[str]] = field(default_factory=dict)
    refills: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Per pooled burst: its starts, and the seconds from its first to the pool full again."""


async def pool_full(api: client.ApiClient, namespace: str, size: int) -> None:
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        actor: Any = await asyncio.to_thread(
            custom.get_namespaced_custom_object, GROUP, VERSION, namespace, ACTORS, POOLED
        )
        pool = (actor.get("status") or {}).get("warmPool") or {}
        if pool.get("ready") == size and pool.get("size") == size:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"the pool did not refill to {size} in {LONG} s")


async def start_to_running(
    helmr: Client, namespace: str, actor: str, workspace: str, ended: list[SessionRef] | None = None
) -> Start:
    """A new Session's start → its first turn's ``turn.running`` (the turn enqueued at
    once). The Session is cancelled then, or, given ``ended``, put there to be cancelled
    later: a burst's Sessions end after it, so that no start is measured against the
    ends of the ones before it (each a save of its disk and its pod's deletion)."""
    started = time.time()
    session, _ = await helmr.actors.start(actor, namespace=namespace, workspace=workspace)
    answered = time.time()
    turn = await session.enqueue({"read": []})
    assert (await turn.wait(timeout=LONG)).status == "completed"
    events = await all_events(session)
    running = first(events, "turn.running", turn.id)
    if ended is None:
        await session.cancel()
    else:
        ended.append(session)
    return Start(
        running - started, running - first(events, "turn.queued", turn.id), answered - started
    )


async def one_at_a_time(
    helmr: Client, cluster: Cluster, namespace: str, args: argparse.Namespace, figures: Figures
) -> None:
    for kind in (POOLED, COLD):
        figures.starts[f"{kind}: one at a time"] = []
        figures.writes[kind] = Counter()
    for i in range(args.samples):
        for kind in (POOLED, COLD):
            await pool_full(cluster.api, namespace, args.pool)  # the refill is in the window
            before = helmr_writes(cluster.kubeconfig)
            start = await start_to_running(helmr, namespace, kind, f"{kind}-{i}")
            figures.starts[f"{kind}: one at a time"].append(start)
            if kind == POOLED:
                await pool_full(cluster.api, namespace, args.pool)
            figures.writes[kind] += helmr_writes(cluster.kubeconfig) - before


async def paced(count: int, rate: float, start: Callable[[int], Awaitable[T]]) -> list[T]:
    """``count`` starts, one every 1/``rate`` s, each measured to its end."""

    async def at(n: int) -> T:
        await asyncio.sleep(n / rate)
        return await start(n)

    return list(await asyncio.gather(*(at(n) for n in range(count))))


async def start_call_floor(cluster: Cluster, args: argparse.Namespace) -> dict[str, list[float]]:
    """The apiserver's part of a start call alone: its two POSTs (a Session's object and
    its Workspace's, made together as the API makes them), one pair at a time and
    ``--high-pool`` pairs at ``--high-rate``, through the control plane's own client (its
    threads and connections) with no control plane running, so nothing reacts to them."""
    kube = Kube(load_config())
    with bench_namespace(cluster.core) as namespace:

        async def pair(name: str) -> float:
            session = Session(
                metadata=ObjectMeta(name=name, namespace=namespace),
                spec=SessionSpec(actor_ref=ActorRef(name=POOLED), workspace=name),
            )
            began = time.monotonic()
            await asyncio.gather(
                kube.create_resource(session),
                kube.create_resource(build_workspace(namespace, name)),
            )
            return time.monotonic() - began

        alone = [await pair(f"floor-{i}") for i in range(args.samples)]
        rate = f"{args.high_pool} at {args.high_rate:g}/s"
        high = await paced(args.high_pool, args.high_rate, lambda n: pair(f"floor-b{n}"))
    await gone(cluster.core, namespace)
    return {"one at a time": alone, rate: high}


async def burst(
    helmr: Client, namespace: str, kind: str, count: int, rate: float, figures: Figures
) -> None:
    print(f"burst: {count} {kind} starts at {rate:g}/s ...", flush=True)

    ended: list[SessionRef] = []

    def one(n: int) -> Awaitable[Start]:
        return start_to_running(helmr, namespace, kind, f"b{rate:g}-{kind}-{n}", ended)

    figures.starts[f"{kind}: {count} at {rate:g}/s"] = await paced(count, rate, one)
    await asyncio.gather(*(session.cancel() for session in ended))


async def refilled(
    helmr: Client, cluster: Cluster, namespace: str, size: int, rate: float, figures: Figures
) -> None:
    """A pooled burst of ``size`` starts at ``rate``, and the pool's refill after it."""
    began = time.monotonic()
    await burst(helmr, namespace, POOLED, size, rate, figures)
    await pool_full(cluster.api, namespace, size)
    figures.refills[f"{POOLED}: {size} at {rate:g}/s"] = (size, time.monotonic() - began)


async def measure(args: argparse.Namespace, cluster: Cluster, **plane: str) -> Figures:
    """Every measurement, against a control plane of its own (``plane``: its env)."""
    figures = Figures(load=list(os.getloadavg()))
    with (
        control_plane(cluster.kubeconfig, **plane) as op,
        bench_namespace(cluster.core) as namespace,
    ):
        common: dict[str, Any] = {"entrypoint": "files:files", "computer": {"size": DISK}}
        pool = {"size": args.pool}
        create_actor(cluster.api, namespace, cluster.image, POOLED, warmPool=pool, **common)
        create_actor(cluster.api, namespace, cluster.image, COLD, **common)
        async with Client(op.url, op.token) as helmr:
            print(f"one at a time: {args.samples} of each ...", flush=True)
            await one_at_a_time(helmr, cluster, namespace, args, figures)
            await pool_full(cluster.api, namespace, args.pool)
            await refilled(helmr, cluster, namespace, args.pool, args.rate, figures)
            await burst(helmr, namespace, COLD, args.pool, args.rate, figures)
            if args.high_pool:
                await grow_pool(cluster.api, namespace, args.high_pool)
                await pool_full(cluster.api, namespace, args.high_pool)
                await refilled(helmr, cluster, namespace, args.high_pool, args.high_rate, figures)
    figures.load += os.getloadavg()
    await gone(cluster.core, namespace)
    return figures


async def gone(core: client.CoreV1Api, namespace: str) -> None:
    """Waits for the namespace's deletion (its pods' ends): the next control plane's
    figures are not taken while the kubelet still stops this one's pods."""
    deadline = time.monotonic() + LONG
    while time.monotonic() < deadline:
        try:
            await asyncio.to_thread(core.read_namespace, namespace)
        except client.ApiException as e:
            if e.status == 404:
                return
            raise
        await asyncio.sleep(1)


async def grow_pool(api: client.ApiClient, namespace: str, size: int) -> None:
    patch = {"spec": {"warmPool": {"size": size}}}
    custom = client.CustomObjectsApi(api)
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object, GROUP, VERSION, namespace, ACTORS, POOLED, patch
    )


def tabulate(table: Table, title: str, figures: Figures, samples: int) -> dict[str, Any]:
    """``figures`` in ``table``; the p50/p99 of each measurement, by name."""
    load = " / ".join(f"{x:.1f}" for x in figures.load)
    table.section(f"{title}: start -> first turn.running (claims of {DISK}; load {load})")
    quantiles: dict[str, Any] = {}
    for name, starts in figures.starts.items():
        quantiles[name] = table.latency(name, [s.from_start for s in starts])
        quantiles[f"{name}, from admission"] = table.latency(
            f"{name}, turn.queued -> turn.running", [s.from_admission for s in starts]
        )
        quantiles[f"{name}, start call"] = table.latency(
            f"{name}, the start call alone", [s.start_call for s in starts]
        )
    pooled, cold = quantiles[f"{POOLED}: one at a time"], quantiles[f"{COLD}: one at a time"]
    table.ratio("ratio pooled / cold, one at a time", pooled, cold)
    for name, (count, seconds) in figures.refills.items():
        rate = f"{count / seconds:.2f} pods/s"
        table.rows.append((f"  refill after {name}: {count} in {seconds:.1f} s", "", rate, "", ""))
    table.section(f"{title}: apiserver writes per start (the apiserver's count, one at a time)")
    for kind, writes in figures.writes.items():
        per_start = sum(writes.values()) / samples
        table.rows.append((f"  {kind}: writes per start", f"{per_start:.1f}", "", "", ""))
        _apiserver_writes.write_rows(table, writes, Counter())
    return quantiles


async def bench(args: argparse.Namespace, cluster: Cluster) -> None:
    floor = {}
    if args.high_pool:
        print("the start call's floor: its two POSTs, no control plane ...", flush=True)
        floor = await start_call_floor(cluster, args)
    planes: dict[str, dict[str, str]] = {"this checkout": {}}
    if args.before is not None:
        before = {"PYTHONPATH": str(args.before / "src")}
        planes = {f"before ({args.before})": before} | planes
    measured = {}
    for title, env in planes.items():
        print(f"control plane: {title}", flush=True)
        measured[title] = await measure(args, cluster, **env)
    table = Table()
    if floor:
        table.section("the start call's floor: its two POSTs, no control plane")
        for name, seconds in floor.items():
            table.latency(name, seconds)
    quantiles = [
        tabulate(table, title, figures, args.samples) for title, figures in measured.items()
    ]
    if len(quantiles) == 2:
        table.section("ratio this checkout / before")
        old, new = quantiles
        for name in new.keys() & old.keys():
            table.ratio(name, new[name], old[name])
    print()
    table.print()


def main() -> None:
    made = parser(__doc__)
    made.add_argument("--samples", type=int, default=5, help="one-at-a-time starts of each")
    made.add_argument("--pool", type=int, default=5, help="the pool's size and burst's starts")
    made.add_argument("--rate", type=float, default=10.0, help="starts per second in a burst")
    made.add_argument("--high-rate", type=float, default=45.0, help="a pooled burst's rate")
    made.add_argument(
        "--high-pool", type=int, default=0, help="the pool and starts at --high-rate (0: none)"
    )
    made.add_argument(
        "--before",
        type=lambda value: Path(value).resolve(),
        help="a checkout whose control plane is measured first",
    )
    run(made, bench)


if __name__ == "__main__":
    main()
