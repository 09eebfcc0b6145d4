"""``bench_scale.py fleet --before SRC``: another version's control plane against this
checkout's, in one run on one seeded store, under the same simulated fleet.

The two control planes take turns (before, after, before, after...: ``--rounds``
pairs), one process at a time on the store (SQLite has one writer): each is
started, its runners reconnect and a short warm-up runs, then one load is
counted, and it is stopped. ``SRC`` is the other version's ``src`` directory
(``git worktree add /tmp/before REV``: ``/tmp/before/src``), put first on its
process's ``PYTHONPATH``; the benchmark's own modules are this checkout's. What
is compared is what load changes least: the control plane's CPU per Turn, whole
process and event loop, each pair's ratio after / before; the Turns/s and latencies
are shown beside them with the load average.

``bench_scale.py fleet --loop asyncio,uvloop`` (without ``--before``) compares the
same way this checkout's control plane on two event loops: the second / the first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import uuid

import aiohttp
from _common import Table
from _fleet import RECEIVE_WAIT, Fleet, Runner, load
from _plane import Plane, counted_load, seed
from _plane_counts import per_turn

CPU = ("cpu s, process", "cpu s, event loop")


async def before_after(
    table: Table, label: str, store: str, args: argparse.Namespace, sessions: int
) -> None:
    print(f"{label}: seeding {sessions} sessions, {args.history} turns ...", flush=True)
    epochs = await seed(store, sessions, args.history)
    token = uuid.uuid4().hex
    if args.before is not None:
        [loop] = args.loops
        planes = {
            "before": Plane(
                store, args.api_turn_resources, count=True, token=token, src=args.before, loop=loop
            ),
            "after": Plane(store, args.api_turn_resources, count=True, token=token, loop=loop),
        }
    else:
        planes = {
            loop: Plane(store, args.api_turn_resources, count=True, token=token, loop=loop)
            for loop in args.loops
        }
    (first, second) = planes  # what is compared: second / first
    cpu: dict[str, list[tuple[float, float]]] = {code: [] for code in planes}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=RECEIVE_WAIT + 30)
    table.section(f"{label}, {sessions} open sessions, {args.history} turns of history")
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as http,
        Fleet(http, planes[second].url, protocol=args.protocols[0]).running() as fleet,
    ):
        for session_id, epoch in epochs.items():
            fleet.serve(session_id, Runner(epoch, token))
        for round_ in range(1, args.rounds + 1):
            for code, plane in planes.items():
                plane.start()
                try:
                    fleet.urls = [plane.url]
                    await load(http, plane, fleet, args.clients, 2, args.burst)  # warm up
                    await asyncio.sleep(1)  # the mirror's pass over the warm-up
                    name = f"{label}-{sessions}-{code}-{round_}"
                    done, took, latencies, before, after = await counted_load(
                        http, plane, fleet, args, name
                    )
                finally:
                    plane.kill()
                ms = [(after[n] - before[n]) * 1000 / max(done, 1) for n in CPU]
                cpu[code].append((ms[0], ms[1]))
                load_avg = os.getloadavg()[0]
                print(f"{label}, {sessions} sessions, {code}, round {round_}, per turn:")
                print("\n".join(per_turn(before, after, done)), flush=True)
                table.rows.append(
                    (
                        f"{code}, round {round_} (load {load_avg:.1f}): no-op turns/s",
                        f"{done / took:.0f}",
                        "",
                        "",
                        "",
                    )
                )
                table.latency("  enqueue -> turn.running", latencies)
                cpu_text = f"{ms[0]:.2f} / {ms[1]:.2f}"
                table.rows.append(("  cpu ms per turn, process / event loop", cpu_text, "", "", ""))
    pairs = list(zip(cpu[first], cpu[second], strict=True))
    for n, name in enumerate(CPU):
        ratios = [a[n] / b[n] for b, a in pairs]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        table.rows.append(
            (
                f"{second} / {first}, {name.removeprefix('cpu s, ')} cpu per turn",
                f"{statistics.median(ratios):.2f}",
                f"({each})",
                "",
                "",
            )
        )
