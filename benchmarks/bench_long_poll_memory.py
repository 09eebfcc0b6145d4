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
it with ``--frames 0``, as tracemalloc's own records count in it), and the peak RSS
while the N connected at once (``VmHWM``, reset before they do): a restart's
reconnect storm, every runner's ``receive`` arriving together.

    .venv/bin/python benchmarks/bench_long_poll_memory.py --sessions 1000 --frames 12

``--server runner-port``: the same app's runner API on a port of its own, as the chart
serves it (``helmr.server.runner_server``: Helmr's own HTTP/1.1 server over httptools).

The alternatives, served the same way to the same client (``--server``): ``aiohttp``
is a bare aiohttp app whose one route awaits a future (aiohttp's own share, without
Helmr's middlewares, inputs and Control); ``raw`` is an ``asyncio.Protocol`` that
reads a request's head and body and keeps only the Session's id and a future per
connection (what a purpose-built long poll, or a stream multiplexing a runner's
calls, costs at least: one connection per runner stays either way, since each
runner is a pod of its own).

    .venv/bin/python benchmarks/bench_long_poll_memory.py --sessions 1000 --frames 0 \
        --server helmr,aiohttp,raw

``--held``: each runner waits in a held settlement (runner protocol 5) instead: its
Session's Turn runs, and the runner's ``complete`` (with ``--result`` bytes of result,
none by default) asks for the next with a ``timeout``; none comes, so the reply's
head is sent and its body waits as an idle ``receive`` would (what an idle runner
holds just after its last Turn, until the wait ends: up to 120 s).

    .venv/bin/python benchmarks/bench_long_poll_memory.py --sessions 1000 --held \
        --result 4096
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
from collections.abc import AsyncIterator, Sized
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _scale_plane import AnyRunner
from tests.compose import open_plane, serving, static_app

from helmr.protocol import routes
from helmr.server import RUNNER_SERVER

# A projected service-account token is a JWT of about a kilobyte: its header is
# kept by aiohttp while the request waits, so the figure uses one as long.
TOKEN = "t" * 1000

CLIENT = """
import asyncio, json, sys
import aiohttp
from helmr.protocol import routes
from helmr.server import RUNNER_SERVER
from helmr.protocol.contract import EPOCH_HEADER

async def main(url, token, sessions, result):
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def receive(session_id, epoch, turn_id):
            headers = {EPOCH_HEADER: str(epoch), "Authorization": f"Bearer {token}"}
            if turn_id is not None:  # --held: settle it, and wait for the next turn
                body = {"next": {"timeout": 300}}
                if result is not None:
                    body["result"] = result
                async with http.post(url + routes.complete(session_id, turn_id), json=body,
                                     headers=headers) as answer:
                    await answer.read()
            while True:
                async with http.post(url + routes.receive(session_id), json={"timeout": 300},
                                     headers=headers) as answer:
                    await answer.read()
        await asyncio.gather(*(receive(*session) for session in sessions))

args = json.loads(sys.stdin.readline())
asyncio.run(main(*args))
"""


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"no {field}")


def _rss_kib() -> int:
    return _status_kib("VmRSS")


def _reset_peak() -> None:
    """From now on ``VmHWM`` is the peak since now (Linux: ``clear_refs`` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


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


class _RawLongPoll(asyncio.Protocol):
    """The least a long poll can hold per connection: the Session's id and a future."""

    __slots__ = ("_buffer", "_waiting", "session_id", "transport")

    def __init__(self, waiting: dict[str, asyncio.Future[None]]) -> None:
        self._buffer = b""
        self._waiting = waiting
        self.session_id = ""

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        head, found, body = self._buffer.partition(b"\r\n\r\n")
        if not found:
            return
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(body) < length:
            return
        self.session_id = head.split(b" ", 2)[1].decode().split("/")[4]
        self._buffer = b""
        self._waiting[self.session_id] = asyncio.get_running_loop().create_future()


@asynccontextmanager
async def _server(
    kind: str, n: int, held: bool
) -> AsyncIterator[tuple[str, list[tuple[str, int, str | None]], Sized]]:
    """The server of ``kind`` serving N Sessions: its URL, the Sessions (id, epoch, and
    with ``held`` the id of the Turn it runs), and what counts its waiting receives."""
    if kind == "raw":
        waiting: dict[str, asyncio.Future[None]] = {}
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _RawLongPoll(waiting), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            yield f"http://127.0.0.1:{port}", [(f"ses_{i}", 1, None) for i in range(n)], waiting
        return
    if kind == "aiohttp":
        futures: dict[str, asyncio.Future[None]] = {}

        async def receive(request: web.Request) -> web.Response:
            future = futures[request.match_info["session_id"]] = loop.create_future()
            await future
            return web.json_response({})

        loop = asyncio.get_running_loop()
        app = web.Application()
        app.router.add_post(routes.RECEIVE, receive)
        async with serving(app) as url:
            yield url, [(f"ses_{i}", 1, None) for i in range(n)], futures
        return
    with tempfile.TemporaryDirectory() as work:
        async with open_plane(Path(work) / "store.db") as plane:
            helmr = static_app(plane.control, {}, AnyRunner(TOKEN))
            sessions: list[tuple[str, int, str | None]] = []
            for i in range(n):
                view = await plane.control.open_session(
                    namespace="team", name=f"s{i}", actor="a", workspace=f"w{i}"
                )
                epoch = await plane.control.process_started(view.id)
                running = None
                if held:
                    await plane.control.enqueue(view.id, None)
                    running = await plane.control.receive(view.id, epoch, 0)
                sessions.append((view.id, epoch, None if running is None else running.id))
            waiters = plane.store._signals._watches  # the waiters, counted
            if kind == "runner-port":
                runner_port = helmr[RUNNER_SERVER]
                port = await runner_port.listen("127.0.0.1", 0)
                try:
                    yield f"http://127.0.0.1:{port}", sessions, waiters
                finally:
                    await runner_port.close()
                return
            async with serving(helmr) as url:
                yield url, sessions, waiters


async def measure(args: argparse.Namespace) -> None:
    """Each server in a process of its own: RSS read after another server in the same
    process would count the memory that one freed."""
    kinds = args.server.split(",")
    if len(kinds) == 1:
        await measure_one(args, kinds[0])
        return
    own = ["--sessions", str(args.sessions), "--frames", str(args.frames), "--top", str(args.top)]
    if args.held:
        own.append("--held")
    if args.result is not None:
        own += ["--result", str(args.result)]
    for kind in kinds:
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, *own, "--server", kind
        )
        await process.wait()


async def measure_one(args: argparse.Namespace, kind: str) -> None:
    n = args.sessions
    async with _server(kind, n, args.held) as (url, sessions, waiting):
        gc.collect()
        if args.frames:
            tracemalloc.start(args.frames)
        rss_before = _rss_kib()
        _reset_peak()
        before = tracemalloc.take_snapshot() if args.frames else None
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, stdin=asyncio.subprocess.PIPE
        )
        assert client.stdin is not None
        result = None if args.result is None else "x" * args.result
        client.stdin.write(json.dumps([url, TOKEN, sessions, result]).encode() + b"\n")
        await client.stdin.drain()
        deadline = time.monotonic() + 120
        while len(waiting) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(waiting)} of {n} receives waiting")
            await asyncio.sleep(0.2)
        await asyncio.sleep(2)
        gc.collect()
        rss_after = _rss_kib()
        peak = _status_kib("VmHWM")
        after = tracemalloc.take_snapshot() if args.frames else None
        if args.frames:
            tracemalloc.stop()
        client.kill()
        await client.wait()
    what = "held settlements" if args.held else "receives"
    print(
        f"{kind}: {n} pending {what}: RSS {(rss_after - rss_before) / n:.1f} KiB each,"
        f" peak while they connected {(peak - rss_before) / n:.1f}",
        end="",
    )
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
    parser.add_argument(
        "--server",
        default="helmr",
        help="helmr, runner-port, aiohttp or raw (comma-separated: each in turn)",
    )
    parser.add_argument(
        "--held",
        action="store_true",
        help="held settlements, not receives (helmr and runner-port only)",
    )
    parser.add_argument(
        "--result", type=int, help="with --held: the settled result, a string of this many bytes"
    )
    asyncio.run(measure(parser.parse_args()))
