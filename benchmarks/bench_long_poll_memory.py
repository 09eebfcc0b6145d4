"""What one runner's pending ``receive`` long poll holds in the control plane's
memory (issue 11: 5,000 Sessions in 300 MiB), without kopf or a cluster.

This process serves the REST and runner API over a SQLite store (``tests.compose``:
the same ``build_app`` as the operator, a static runner token as long as a pod-bound
one), opens N Sessions each with a started process, and takes a tracemalloc
snapshot. A client in a process of its own (so none of its memory is counted here)
then holds one ``receive`` per Session, each on its own connection as runners do.
Once every Session has a waiter, the second snapshot: what was allocated in
between and is still alive, per pending ``receive``, by the innermost aiohttp,
Helmr or asyncio line. RSS is read at both points too (this process only; compare
it with ``--frames 0``, as tracemalloc's own records count in it).

    .venv/bin/python benchmarks/bench_long_poll_memory.py --sessions 1000 --frames 12
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _scale_plane import AnyRunner
from tests.compose import open_plane, serving, static_app

# A projected service-account token is a JWT of about a kilobyte: its header is
# kept by aiohttp while the request waits, so the figure uses one as long.
TOKEN = "t" * 1000

CLIENT = """
import asyncio, json, sys
import aiohttp
from helmr.protocol import routes
from helmr.protocol.contract import EPOCH_HEADER

async def main(url, token, sessions):
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def receive(session_id, epoch):
            headers = {EPOCH_HEADER: str(epoch), "Authorization": f"Bearer {token}"}
            while True:
                async with http.post(url + routes.receive(session_id), json={"timeout": 300},
                                     headers=headers) as answer:
                    await answer.read()
        await asyncio.gather(*(receive(s, e) for s, e in sessions))

args = json.loads(sys.stdin.readline())
asyncio.run(main(*args))
"""


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError("no VmRSS")


def _where(traceback: tracemalloc.Traceback) -> str:
    """The innermost frame that is Helmr's, aiohttp's or asyncio's."""
    for frame in reversed(traceback):
        name = frame.filename
        for marker in ("/site-packages/", "/src/", "/lib/python3."):
            if marker in name:
                short = name.split(marker)[1]
                if short.startswith(("helmr/", "aiohttp/", "asyncio/", "multidict/", "yarl/")):
                    return f"{short}:{frame.lineno}"
    return f"{traceback[-1].filename}:{traceback[-1].lineno}"


async def measure(args: argparse.Namespace) -> None:
    n = args.sessions
    with tempfile.TemporaryDirectory() as work:
        async with open_plane(Path(work) / "store.db") as plane:
            app = static_app(plane.control, {}, AnyRunner(TOKEN))
            sessions = []
            for i in range(n):
                view = await plane.control.open_session(
                    namespace="team", name=f"s{i}", actor="a", workspace=f"w{i}"
                )
                sessions.append((view.id, await plane.control.process_started(view.id)))
            watches = plane.store._signals._watches  # the waiters, counted
            async with serving(app) as url:
                gc.collect()
                if args.frames:
                    tracemalloc.start(args.frames)
                rss_before = _rss_kib()
                before = tracemalloc.take_snapshot() if args.frames else None
                client = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", CLIENT, stdin=asyncio.subprocess.PIPE
                )
                assert client.stdin is not None
                client.stdin.write(json.dumps([url, TOKEN, sessions]).encode() + b"\n")
                await client.stdin.drain()
                deadline = time.monotonic() + 120
                while len(watches) < n:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"only {len(watches)} of {n} receives waiting")
                    await asyncio.sleep(0.2)
                await asyncio.sleep(2)
                gc.collect()
                rss_after = _rss_kib()
                after = tracemalloc.take_snapshot() if args.frames else None
                client.kill()
                await client.wait()
    print(f"{n} pending receives: RSS {(rss_after - rss_before) / n:.1f} KiB each", end="")
    if before is None or after is None:
        print(" (tracemalloc off)")
    else:
        print(" (tracemalloc's own records included)")
        report(before, after, n, args.top)


def report(
    before: tracemalloc.Snapshot,
    after: tracemalloc.Snapshot,
    n: int,
    top: int,
) -> None:
    by_line: Counter[str] = Counter()
    total = 0
    for diff in after.compare_to(before, "traceback"):
        by_line[_where(diff.traceback)] += diff.size_diff
        total += diff.size_diff
    print(f"traced, alive, allocated while they connected: {total / 1024 / n:.2f} KiB each")
    for where, size in by_line.most_common(top):
        print(f"  {size / 1024 / n:6.2f}  {where}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=12, help="tracemalloc frames; 0: off")
    parser.add_argument("--top", type=int, default=30)
    asyncio.run(measure(parser.parse_args()))
