"""Where the real control plane's memory per open Session goes, and how long a
restart takes to be ready again, at N Sessions (issue 11, item 5 budgets).

The same setup as ``bench_scale.py kwok`` (``_kwok_bench.py``): ``kopf run -m
helmr.operator`` on this host, runner pods on a kwok node, one process playing
every runner pod with a token bound to it; a SQLite store, no history, API Turns
without resources. ``kopf run`` also loads ``_heap_probe.py``.

1. With the namespace and its Actor made and the control plane idle, its RSS is
   read and the probe signalled once (objects counted by type; with
   ``--frames``, tracemalloc starts).
2. N Sessions start, each with a Turn; once their runner pods exist (Pending
   until their disks bind, which takes long on the shared cluster), every runner
   connects (a TokenReview each) and completes one more Turn. After
   ``--settle`` seconds (kopf's per-object workers exit after 5 idle seconds),
   RSS is read and the probe signalled again.
3. Reported: RSS per Session; the allocators' accounts (live blocks, and the
   free memory pymalloc's arenas and glibc's heap keep); objects per Session by type; and with
   ``--frames`` what was allocated since step 1 and is still alive, per Session,
   by the package and line that allocated it, and by the innermost Helmr or
   kopf line that asked for it.
4. ``--restarts`` times: SIGKILL, start again, until the API admits a Turn and
   until it completed; RSS after ``--settle``.

    hack/build.sh kwok && KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_operator_memory.py --sessions 500 --frames 20

Compare RSS runs without ``--frames`` (tracemalloc's own records take memory).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _fleet import ready_after_restart
from _kwok import SELECTOR, TOLERATIONS
from _kwok_bench import (
    RunnerPod,
    _rss_mib,
    connected_fleet,
    kwok_cluster,
    scale_namespace,
    start_sessions,
)
from kubernetes import client
from tests.cluster import conftest
from tests.cluster.sessions import create_actor

from helmr.kube.labels import LABEL_COMPONENT, LABEL_EPOCH, LABEL_SESSION_ID, RUNNER

HERE = Path(__file__).resolve().parent


def runner_pods(core: client.CoreV1Api, namespace: str) -> dict[str, RunnerPod]:
    """Each Session's newest runner pod, in any phase."""
    # Any: the client's models make every field optional.
    listed: Any = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_COMPONENT}={RUNNER}")
    newest: dict[str, RunnerPod] = {}
    for pod in listed.items:
        labels = pod.metadata.labels
        found = RunnerPod(
            labels[LABEL_SESSION_ID], int(labels[LABEL_EPOCH]), pod.metadata.name, pod.metadata.uid
        )
        known = newest.get(found.session_id)
        if pod.metadata.deletion_timestamp is None and (known is None or known.epoch < found.epoch):
            newest[found.session_id] = found
    return newest


async def wait_for_pods(
    core: client.CoreV1Api, namespace: str, sessions: int
) -> dict[str, RunnerPod]:
    """Each Session's runner pod, once all ``sessions`` have one. Not waiting for them
    to run: that waits for their Computer disks to bind, a few a second on the
    shared local cluster. A pod-bound token is good from the pod's creation."""
    deadline = time.monotonic() + 120 + sessions * 0.5
    while True:
        pods = await asyncio.to_thread(runner_pods, core, namespace)
        if len(pods) >= sessions:
            return pods
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(pods)} of {sessions} runner pods made")
        await asyncio.sleep(2)


async def median_rss(pid: int, seconds: int) -> float:
    """The median of one RSS reading a second for ``seconds`` (one reading if 0): a
    single reading lands anywhere between the allocator's highs and lows."""
    readings = [_rss_mib(pid)]
    for _ in range(seconds - 1):
        await asyncio.sleep(1)
        readings.append(_rss_mib(pid))
    return statistics.median(readings)


async def signal_probe(op: conftest.Operator, probe_dir: Path, n: int) -> None:
    """Signals the probe for the ``n``-th time and waits until it wrote."""
    assert op.process is not None
    op.process.send_signal(signal.SIGUSR1)
    written = probe_dir / f"types-{n}.json"
    deadline = time.monotonic() + 60
    while not written.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the probe wrote no {written}")
        await asyncio.sleep(0.5)
    await asyncio.sleep(1)  # a snapshot is written after the counts


def _package(filename: str) -> str:
    """``kopf``, ``aiohttp``, ``helmr/kube.py``, ``stdlib:json/decoder.py``, ..."""
    if "/site-packages/" in filename:
        return filename.split("/site-packages/")[1].split("/")[0]
    if "/helmr/" in filename:
        return "helmr/" + filename.split("/helmr/")[-1]
    parts = filename.split("/")
    return "stdlib:" + "/".join(parts[-2:])


def _ours(filename: str) -> bool:
    return "/helmr/" in filename or "/site-packages/kopf/" in filename


def _short(filename: str, lineno: int) -> str:
    for marker in ("/site-packages/", "/src/"):
        if marker in filename:
            filename = filename.split(marker)[1]
            break
    return f"{filename}:{lineno}"


def heap_report(snapshot_path: Path, sessions: int, top: int) -> None:
    snapshot = tracemalloc.Snapshot.load(str(snapshot_path))
    by_package: Counter[str] = Counter()
    by_line: Counter[str] = Counter()
    by_caller: Counter[str] = Counter()
    total = 0
    for stat in snapshot.statistics("traceback"):
        frames = list(reversed(stat.traceback))  # most recent first
        allocating = next((f for f in frames if "/python3." not in f.filename), frames[0])
        allocating = next(
            (f for f in frames if "/site-packages/" in f.filename or "/helmr/" in f.filename),
            allocating,
        )
        caller = next((f for f in frames if _ours(f.filename)), frames[-1])
        by_package[_package(allocating.filename)] += stat.size
        by_line[_short(allocating.filename, allocating.lineno)] += stat.size
        by_caller[_short(caller.filename, caller.lineno)] += stat.size
        total += stat.size
    per = 1024 * sessions
    print(f"\ntraced, alive, allocated since the first probe: {total / per:.1f} KiB per Session")
    for title, counts in (
        ("by package (innermost non-stdlib frame)", by_package),
        ("by line (innermost non-stdlib frame)", by_line),
        ("by the innermost Helmr or kopf line", by_caller),
    ):
        print(f"\n  {title}, KiB per Session:")
        for key, size in counts.most_common(top):
            print(f"    {size / per:8.2f}  {key}")


def trim_report(probe_dir: Path, sessions: int) -> None:
    """RSS before and after ``malloc_trim(0)`` at each probe: the freed memory glibc kept."""
    idle, loaded = (json.loads((probe_dir / f"trim-{n}.json").read_text()) for n in (1, 2))
    for name, trim in (("idle", idle), ("loaded", loaded)):
        kept = (trim["before_kib"] - trim["after_kib"]) / 1024
        print(f"  malloc_trim(0) {name}: {kept:.1f} MiB returned")
    per = (loaded["after_kib"] - idle["after_kib"]) / sessions
    print(f"  after trimming, {per:.1f} KiB per Session")


def allocators_report(probe_dir: Path, sessions: int) -> None:
    """The allocators' accounts at both readings (``_heap_probe._allocators``): what of
    the RSS per Session is live blocks, and what is memory the allocators keep."""
    idle, loaded = (json.loads((probe_dir / f"alloc-{n}.json").read_text()) for n in (1, 2))
    print("\nthe allocators' accounts, idle -> loaded (MiB), and KiB per Session:")
    for key in idle:
        print(
            f"  {key:16} {idle[key] / 1024:8.1f} -> {loaded[key] / 1024:8.1f}"
            f"  {(loaded[key] - idle[key]) / sessions:8.1f}"
        )


def types_report(before: Path, after: Path, sessions: int, top: int) -> None:
    counts = Counter(json.loads(after.read_text()))
    counts.subtract(Counter(json.loads(before.read_text())))
    print("\nlive objects per Session, by type (gc-tracked):")
    for name, n in counts.most_common(top):
        print(f"  {n / sessions:8.2f}  {name}")


async def measure(
    core: client.CoreV1Api,
    api: client.ApiClient,
    kubeconfig: str,
    args: argparse.Namespace,
) -> None:
    work = Path(tempfile.mkdtemp(prefix="helmr-memory-"))
    probe_dir = work / "probe"
    probe_dir.mkdir()
    python_path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    op = conftest.Operator.for_cluster(
        kubeconfig,
        work,
        HELMR_API_TURN_RESOURCES="false",
        HELMR_RUNNER_NODE_SELECTOR=json.dumps(SELECTOR),
        HELMR_RUNNER_TOLERATIONS=json.dumps(TOLERATIONS),
        # Pods wait for their disks (see wait_for_pods) without failing their preparation.
        HELMR_PREPARATION_TIMEOUT_SECONDS="3600",
        HELMR_BENCH_PROBE_DIR=str(probe_dir),
        HELMR_BENCH_TRACE_FRAMES=str(args.frames),
        HELMR_BENCH_TRIM="1" if args.trim else "",
        PYTHONPATH=python_path,
    )
    op = dataclasses.replace(op, modules=(*op.modules, "_heap_probe"))
    n = args.sessions
    print(f"{n} sessions (operator log: {op.log})", flush=True)
    with scale_namespace(core, op) as namespace:
        actor = create_actor(api, namespace, conftest.RUNNER_IMAGE)
        await asyncio.sleep(args.settle)
        assert op.process is not None
        idle = await median_rss(op.process.pid, args.samples)
        await signal_probe(op, probe_dir, 1)
        began = time.monotonic()
        await start_sessions(op, actor, namespace, n)
        pods = await wait_for_pods(core, namespace, n)
        print(f"  {n} runner pods made in {time.monotonic() - began:.0f} s", flush=True)
        async with connected_fleet(op, core, namespace, pods) as (http, fleet):
            await asyncio.sleep(args.settle)
            loaded = await median_rss(op.process.pid, args.samples)
            peak = _rss_mib(op.process.pid, "VmHWM")
            await signal_probe(op, probe_dir, 2)
            median = f" (median of {args.samples} s)" if args.samples else ""
            print(f"\nRSS{median} idle {idle:.1f} MiB, with {n} open Sessions {loaded:.1f} MiB:")
            per = (loaded - idle) * 1024 / n
            print(
                f"  {per:.1f} KiB per Session; 5,000 Sessions: {idle + per * 5000 / 1024:.0f} MiB"
            )
            print(f"  at its highest so far {peak:.1f} MiB", flush=True)
            print(f"  load average {os.getloadavg()}", flush=True)
            if args.trim:
                trim_report(probe_dir, n)
            allocators_report(probe_dir, n)
            types_report(probe_dir / "types-1.json", probe_dir / "types-2.json", n, args.top)
            if args.frames:
                heap_report(probe_dir / "heap-2.snapshot", n, args.top)

            def restart() -> None:
                op.kill()
                op.start()

            for _ in range(args.restarts):
                try:
                    admitted, done = await ready_after_restart(http, op, fleet, restart)
                except TimeoutError:
                    print("\nrestart: the Turn admitted did not complete in 120 s", flush=True)
                    continue
                await asyncio.sleep(args.settle)
                rss = await median_rss(op.process.pid, args.samples)
                peak = _rss_mib(op.process.pid, "VmHWM")
                print(
                    f"\nrestart -> API admits a Turn {admitted:.2f} s, that Turn done"
                    f" {done:.2f} s; RSS {args.settle:.0f} s later {rss:.1f} MiB"
                    f" (at its highest {peak:.1f}); load average {os.getloadavg()}",
                    flush=True,
                )
                # The new process's probe starts its count again: its first accounts.
                for first in ("types-1.json", "alloc-1.json"):
                    (probe_dir / first).unlink(missing_ok=True)
                await signal_probe(op, probe_dir, 1)
                accounts = json.loads((probe_dir / "alloc-1.json").read_text())
                print("  the allocators' accounts (MiB):", flush=True)
                for key, kib in accounts.items():
                    print(f"    {key:16} {kib / 1024:8.1f}", flush=True)


async def main(args: argparse.Namespace) -> None:
    with kwok_cluster() as (kubeconfig, api, _):
        await measure(client.CoreV1Api(api), api, kubeconfig, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--frames", type=int, default=0, help="tracemalloc frames; 0: off")
    parser.add_argument("--settle", type=float, default=15, help="seconds before each reading")
    parser.add_argument("--restarts", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--samples", type=int, default=0, help="RSS as the median of a reading a second for N s"
    )
    parser.add_argument(
        "--trim", action="store_true", help="also RSS after malloc_trim(0) at each reading"
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(main(parser.parse_args()))
