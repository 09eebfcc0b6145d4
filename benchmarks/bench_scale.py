"""How far one control-plane replica goes: many open Sessions, a long history, a
simulated runner fleet completing no-op Turns (issue 11, item 5).

``fleet`` (no Kubernetes): the control plane runs as its own process
(``_scale_plane.py``: store, REST and runner API, status mirror writing to a
counting stand-in for the apiserver). The store is seeded with N open Sessions,
each with its runner process started (in the store only) and a history of
``--history`` completed Turns spread over them. One asyncio process (this one)
then plays every Session's runner over the runner protocol (``receive`` long
polls, ``complete``) while clients enqueue no-op Turns over the REST API.
Reported per store and N:

  - control-plane RSS, after the load;
  - restart -> ready: SIGKILL, a new process on the same store, until its API
    admits a Turn, and until that Turn completed (every runner reconnects, with
    the runner's backoff);
  - no-op turns/s with ``--clients`` enqueuers, each waiting for its Turn;
  - enqueue -> ``turn.running`` p50/p99 under that load (as the fleet's
    ``receive`` is answered: the ``turn.running`` record is its commit);
  - the status mirror's would-be apiserver writes per Turn, with
    ``--api-turn-resources`` on or off (off: the chart's ``apiTurnResources: false``).

Not simulated here: pods, the supervisor, kopf's handlers, TokenReview; runners
authenticate with one static token. The ``kwok`` mode has them all.

``kwok`` (a real cluster, no containers): the real control plane (``kopf run``)
with N Sessions whose runner pods kwok keeps Running on a fake node, a fleet
playing every pod with a token bound to it (``_kwok_bench.py``); apiserver writes
counted by the apiserver. Needs ``hack/build.sh kwok``.

``replicas`` (no Kubernetes, PostgreSQL): 1 against N control-plane processes on one
database, phases alternating on the same store, CPU per Turn by process
(``_replicas.py``).

``writes`` (a real cluster): real runner pods of the echo actor, a real control
plane (``kopf run``), and the apiserver's own ``apiserver_request_total`` read
before and after (``_apiserver_writes.py``).

    .venv/bin/python benchmarks/bench_scale.py fleet --sessions 100,1000 \\
        --history 20000 --store sqlite,postgres
    .venv/bin/python benchmarks/bench_scale.py fleet --sessions 1000 --history 2000 \\
        --store sqlite,postgres --seconds 10 --rounds 3 --loop asyncio,uvloop
    .venv/bin/python benchmarks/bench_scale.py replicas --sessions 500 --history 1000 \\
        --seconds 15 --replicas 2
    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_scale.py writes --sessions 1,10 --turns 20
    hack/build.sh kwok && KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_scale.py kwok --sessions 100,1000 --history 10000
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Table
from _fleet import RECEIVE_WAIT, Fleet, Runner, load, ready_after_restart
from _loops import PRODUCT, loop_names
from _plane import Plane, counted_load, mirror_passes, mirror_writes, seed
from _plane_counts import per_turn
from _stores import each_row

from helmr.protocol.contract import PROTOCOL

# --- one configuration ----------------------------------------------------------------------


async def measure(
    table: Table, label: str, store: str, args: argparse.Namespace, sessions: int
) -> None:
    print(f"{label}: seeding {sessions} sessions, {args.history} turns ...", flush=True)
    began = time.monotonic()
    epochs = await seed(store, sessions, args.history)
    print(f"  seeded in {time.monotonic() - began:.0f} s", flush=True)
    [loop] = args.loops
    plane = Plane(store, args.api_turn_resources, args.per_turn, loop=loop)
    plane.start()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=RECEIVE_WAIT + 30)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=timeout) as http,
            Fleet(http, plane.url).running() as fleet,
        ):
            for session_id, epoch in epochs.items():
                fleet.serve(session_id, Runner(epoch, plane.token))
            await load(http, plane, fleet, args.clients, 2)  # warm up
            writes_before = await mirror_writes(http, plane)
            await asyncio.sleep(1)  # the mirror's last pass over the warm-up
            writes_before = await mirror_writes(http, plane)
            passes_before = len(await mirror_passes(http, plane))
            loads: list[
                tuple[int, int, float, list[float], dict[str, float], dict[str, float]]
            ] = []
            # Each protocol in turn, twice over when there are several: the same
            # process and store, and the machine's load shared alike.
            rounds = args.protocols * (2 if len(args.protocols) > 1 else 1)
            for protocol in rounds:
                fleet.protocol = protocol
                name = f"{label}-{sessions}-{len(loads) + 1}"
                loads.append((protocol, *await counted_load(http, plane, fleet, args, name)))
            await asyncio.sleep(1.5)  # the mirror's passes over the last Turns
            writes = await mirror_writes(http, plane) - writes_before
            passes = (await mirror_passes(http, plane))[passes_before:]
            rss = plane.rss_mib()
            restart = await ready_after_restart(http, plane, fleet, plane.restart)
    finally:
        plane.kill()
    table.section(f"{label}, {sessions} open sessions, {args.history} turns of history")
    table.rows.append(("control-plane RSS", f"{rss:.0f} MiB", "", "", ""))
    table.rows.append(("restart -> API admits a turn", f"{restart[0]:.2f} s", "", "", ""))
    table.rows.append(("restart -> that turn completed", f"{restart[1]:.2f} s", "", "", ""))
    total = 0
    for protocol, done, took, latencies, counts_before, counts in loads:
        total += done
        what = f"runner protocol {protocol}, {args.clients} clients, bursts of {args.burst}"
        if counts:
            print(f"{label}, {sessions} sessions, {what}, per turn:")
            print("\n".join(per_turn(counts_before, counts, done)), flush=True)
        table.rows.append((f"no-op turns/s ({what})", f"{done / took:.0f}", "", "", ""))
        table.latency("  enqueue -> turn.running", latencies)
    table.rows.append(("mirror writes per turn", f"{writes / max(total, 1):.2f}", "", "", ""))
    if passes:
        table.latency("status mirror pass", [seconds for _, seconds in passes])
    else:
        table.rows.append(("  status mirror pass", "none ended in the load", "", "", ""))
    sessions_per_pass = sum(n for n, _ in passes) / max(len(passes), 1)
    table.rows.append(("  sessions per pass, mean", f"{sessions_per_pass:.0f}", "", "", ""))


async def fleet_bench(args: argparse.Namespace) -> None:
    table = Table()

    async def row(kind: str, store: str, sessions: int) -> None:
        if args.before is None and len(args.loops) == 1:
            await measure(table, kind, store, args, sessions)
        else:
            from _before_after import before_after

            await before_after(table, kind, store, args, sessions)

    await each_row(args, table, row)


def load_arguments(parser: argparse.ArgumentParser, history: int) -> None:
    """The Sessions, history, stores and load of the ``fleet`` and ``kwok`` modes."""
    parser.add_argument("--sessions", default="100,1000", help="comma-separated counts")
    parser.add_argument("--history", type=int, default=history, help="turns of history, in all")
    parser.add_argument("--store", default="sqlite,postgres")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--api-turn-resources", action="store_true")
    parser.add_argument(
        "--protocol",
        dest="protocols",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[PROTOCOL],
        help=(
            "runner protocol revisions the fleet speaks, comma-separated: each in turn"
            " (with --before, one the older version speaks too)"
        ),
    )
    parser.add_argument(
        "--burst", type=int, default=1, help="turns each client enqueues to a session at once"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="bursts the clients start per second, at most (default: as fast as they can)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    fleet = modes.add_parser("fleet", help="a simulated runner fleet, no Kubernetes")
    load_arguments(fleet, 20_000)
    fleet.add_argument(
        "--per-turn", action="store_true", help="count the control plane's work per turn"
    )
    fleet.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a directory: sample the control plane with py-spy through each load",
    )
    fleet.add_argument(
        "--before",
        type=Path,
        default=None,
        help="another version's src directory: its control plane and this one's take turns"
        " on one store, CPU per turn compared (benchmarks/_before_after.py)",
    )
    fleet.add_argument(
        "--loop",
        dest="loops",
        type=loop_names,
        default=[PRODUCT],
        help=f"the control plane's event loop (asyncio, uvloop; default: the product's, {PRODUCT});"
        " two, comma-separated, are compared as --before compares versions",
    )
    fleet.add_argument(
        "--rounds", type=int, default=2, help="with --before or two loops: pairs of loads"
    )
    writes = modes.add_parser("writes", help="apiserver writes per turn on a real cluster")
    writes.add_argument("--sessions", default="1,10", help="comma-separated counts")
    writes.add_argument("--turns", type=int, default=20, help="warm turns per session")
    writes.add_argument("--build", action="store_true", help="build the runner image first")
    writes.add_argument(
        "--pace", type=float, default=0.0, help="seconds between a session's turns (0: at once)"
    )
    writes.add_argument(
        "--save-intervals", default="0", help="the Actor's computer.saveIntervalSeconds, compared"
    )
    writes.add_argument("--api-turn-resources", default="true,false", help="true, false or both")
    kwok = modes.add_parser("kwok", help="the real control plane, runner pods on a kwok node")
    load_arguments(kwok, 10_000)
    kwok.add_argument(
        "--profile",
        type=Path,
        help="py-spy (pip install py-spy) samples the control plane over the load into"
        " this file (collapsed stacks, every thread, idle ones included)",
    )
    replicas = modes.add_parser("replicas", help="1 against N replicas on PostgreSQL")
    load_arguments(replicas, 10_000)
    replicas.add_argument("--replicas", type=int, default=2, help="the most replicas")
    replicas.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a directory: sample each replica with py-spy through each phase's load",
    )
    args = parser.parse_args()
    if args.mode == "fleet" and len(args.loops) + (args.before is not None) > 2:
        parser.error("fleet compares two control planes at most: --before, or two loops")
    if args.mode == "fleet":
        asyncio.run(fleet_bench(args))
    elif args.mode == "replicas":
        from _replicas import replicas_bench

        args.sessions = int(args.sessions)
        asyncio.run(replicas_bench(args))
    elif args.mode == "kwok":
        from _kwok_bench import kwok_bench

        # Stopped from outside, it still removes its node, namespace and kwok:
        # asyncio.run cancels the benchmark on KeyboardInterrupt, and its cleanups run.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        asyncio.run(kwok_bench(args))
    else:
        from _apiserver_writes import writes_bench

        asyncio.run(writes_bench(args))


if __name__ == "__main__":
    main()
