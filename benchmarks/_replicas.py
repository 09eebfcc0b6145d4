"""``bench_scale.py replicas``: 1 against N control-plane replicas on one PostgreSQL
store, under the same simulated fleet (issue 31, item 4).

N ``_scale_plane.py`` processes share the database (the first runs the status
mirror, as the leader does; every one serves the REST and runner API, and wakes
its waiters from the store's change feed). Phases alternate 1, N, 1, N replicas
on the same store and processes: in a phase of r, runner i calls replica
``i % r`` and client n enqueues through replica ``n % r`` (the Service spreads
connections so). Each phase reports no-op Turns/s, enqueue -> ``turn.running``,
and CPU per Turn of each replica, of the PostgreSQL server (its postmaster and
backends) and of this process (the fleet and the clients), with the load
average: on a machine with fewer cores than those processes, the sum of CPU per
Turn bounds the rate, and the split says what a core per replica would give.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import aiohttp
from _common import Table
from _fleet import RECEIVE_WAIT, Fleet, Runner, load
from _plane import Plane, plane_counts, seed
from _profile import available, record, shares
from _stores import stores

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def postgres_cpu(url: str) -> float:
    """CPU seconds so far of the PostgreSQL server serving ``url``: its postmaster
    (found by its port option) and every process it started that is still alive."""
    port = f"-p {urlparse(url).port}"
    stats: dict[int, tuple[int, float]] = {}
    postmaster = None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # ended meanwhile
        fields = stat.rsplit(")", 1)[1].split()
        ppid, cpu = int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        stats[int(entry.name)] = (ppid, cpu)
        if "postgres" in cmdline and port in cmdline:
            postmaster = int(entry.name)
    if postmaster is None:
        raise LookupError(f"no PostgreSQL server with {port}")
    return sum(cpu for pid, (ppid, cpu) in stats.items() if postmaster in (pid, ppid))


async def replicas_bench(args: argparse.Namespace) -> None:
    if args.profile is not None and available() is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy)")
    table = Table()
    with stores(["postgres"]) as factories:
        [(_, factory)] = list(factories)
        with factory() as store:
            print(f"seeding {args.sessions} sessions, {args.history} turns ...", flush=True)
            epochs = await seed(store, args.sessions, args.history)
            token = uuid.uuid4().hex
            planes = [
                Plane(store, False, count=True, mirrors=n == 0, token=token)
                for n in range(args.replicas)
            ]
            for plane in planes:
                plane.start()
            try:
                await _phases(args, table, store, planes, epochs)
            finally:
                for plane in planes:
                    plane.kill()
    print()
    print(f"{args.seconds:.0f} s of load per phase; {os.cpu_count()} cores")
    table.print()


async def _phases(
    args: argparse.Namespace,
    table: Table,
    store: str,
    planes: list[Plane],
    epochs: dict[str, int],
) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=RECEIVE_WAIT + 30)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as http,
        Fleet(http, planes[0].url, protocol=args.protocols[0]).running() as fleet,
    ):
        fleet.urls = [plane.url for plane in planes]
        for session_id, epoch in epochs.items():
            fleet.serve(session_id, Runner(epoch, planes[0].token))
        await load(http, planes, fleet, args.clients, 2, args.burst)  # warm up
        table.section(
            f"PostgreSQL, {args.sessions} open sessions, {args.history} turns of history,"
            f" {args.clients} clients, bursts of {args.burst}, runner protocol {args.protocols[0]}"
        )
        for phase, replicas in enumerate([1, args.replicas] * 2, 1):
            serving = planes[:replicas]
            fleet.urls = [plane.url for plane in serving]
            await asyncio.sleep(1)  # the runners' next calls go to the phase's replicas
            before = [await plane_counts(http, plane) for plane in planes]
            pg_before, own_before = postgres_cpu(store), time.process_time()
            spies = await _profiles(args, planes, phase)
            done, took, latencies = await load(
                http, serving, fleet, args.clients, args.seconds, args.burst, args.rate
            )
            for spy in spies:
                await spy.wait()
            pg, own = postgres_cpu(store) - pg_before, time.process_time() - own_before
            after = [await plane_counts(http, plane) for plane in planes]
            load_avg = os.getloadavg()[0]
            table.rows.append(
                (
                    f"{replicas} replica(s): no-op turns/s (load {load_avg:.1f})",
                    f"{done / took:.0f}",
                    "",
                    "",
                    "",
                )
            )
            table.latency("enqueue -> turn.running", latencies)
            per_turn = 1000 / max(done, 1)
            cpu = [
                (a["cpu s, process"] - b["cpu s, process"]) * per_turn
                for b, a in zip(before, after, strict=True)
            ]
            for n, ms in enumerate(cpu):
                table.rows.append((f"  cpu ms per turn, replica {n + 1}", f"{ms:.2f}", "", "", ""))
            table.rows.append(("  cpu ms per turn, PostgreSQL", f"{pg * per_turn:.2f}", "", "", ""))
            table.rows.append(
                ("  cpu ms per turn, fleet and clients", f"{own * per_turn:.2f}", "", "", "")
            )
            total = sum(cpu) + (pg + own) * per_turn
            table.rows.append(("  cpu ms per turn, all", f"{total:.2f}", "", "", ""))
            _profile_rows(args, table, planes, phase)
            table.print()


async def _profiles(
    args: argparse.Namespace, planes: list[Plane], phase: int
) -> list[asyncio.subprocess.Process]:
    """With ``--profile DIR``: py-spy sampling each replica through the phase's load."""
    if args.profile is None:
        return []
    args.profile.mkdir(parents=True, exist_ok=True)
    return [
        await record(plane.pid, args.seconds, _profile_path(args, phase, n))
        for n, plane in enumerate(planes, 1)
    ]


def _profile_path(args: argparse.Namespace, phase: int, replica: int) -> Path:
    directory: Path = args.profile
    return directory / f"phase{phase}-replica{replica}.txt"


def _profile_rows(args: argparse.Namespace, table: Table, planes: list[Plane], phase: int) -> None:
    """Each replica's samples holding the GIL, by what they were doing."""
    if args.profile is None:
        return
    for n in range(1, len(planes) + 1):
        path = _profile_path(args, phase, n)
        if not path.exists():
            continue
        total, counts = shares(path)
        table.rows.append((f"  replica {n}: samples holding the GIL", f"{total}", "", "", ""))
        for name, count in counts.most_common():
            share = f"{100 * count / max(total, 1):.0f}%"
            table.rows.append((f"    {name}", share, "", "", ""))
