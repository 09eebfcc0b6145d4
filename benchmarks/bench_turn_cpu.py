"""The control plane's CPU per no-op Turn in Control and the store alone (or, with
``--http``, through the REST and runner API too): no status mirror, one Turn at a time
(issue 31).

A process of its own opens a store (SQLite, or a database on a throwaway PostgreSQL
server), opens ``--sessions`` Sessions with their processes started, and runs no-op
Turns one after another through Control as the API does: the enqueue
(``enqueue_answering_session``), the runner's ``receive`` that starts it, its
``complete``. After a warm-up it reports the process's CPU (user and system,
every thread) per Turn over ``--turns``. One Turn at a time on a loaded machine
is a steadier measure than the fleet's (``bench_scale.py fleet``), whose CPU per
Turn moves with its rate: what is compared here is the code's own work. Steadier
still, ``--instructions`` counts the instructions each Turn runs (valgrind's
callgrind, counting from the end of the warm-up; about 50 times slower, so use a
few hundred Turns): the same code runs the same count within 0.2% at any load.
Each run also prints the event loop's thread's share (with ``--http``: aiohttp and the
API's own work, without the store's threads); ``--loop-thread`` compares that share
alone, steadier for a change to the API's code, since the store's threads' counts
move with how their work interleaves with the loop's (by up to 0.5% at a load of 10).

``--http``: the same Turns as a client and a runner make them, over HTTP: the child
serves the REST and runner API (``static_app``) over its Control, and this process
calls it (its own work is not counted), so aiohttp, the middlewares, the routes'
inputs and answers are measured with the rest. The runners speak the child's runner
protocol revision as the runner SDK does (``HttpRunner``): a ``receive`` long poll
out before each Turn's enqueue, and ``complete`` with ``next`` from revision 3;
from revision 5 that ``complete``'s reply is held and brings the next Turn (two
requests per Turn, the enqueue's included, where earlier revisions make three).

``--profile FILE``: the child runs the counted Turns under cProfile (its event loop's
thread only: the store's threads are not seen) and writes the stats to ``FILE``; the
functions taking the most time and their calls per Turn are printed, after each child
(the next one writes over ``FILE``). Slower, so not with ``--instructions``.

``--before SRC`` runs another version's ``src`` (``git worktree add /tmp/before REV``:
``/tmp/before/src``) the same way, alternating (``--rounds`` pairs), and prints each
pair's ratio after / before and their median.

``--loop asyncio,uvloop`` runs the child on each event loop in turn (the standard
library's, and uvloop's, which ``kopf run`` uses when it is installed), alternating
like ``--before`` (with it, each version on each loop), and prints each loop's ratio
to the first one named.

    .venv/bin/python benchmarks/bench_turn_cpu.py [--turns 2000] [--store sqlite,postgres] \\
        [--before SRC --rounds 5]
    .venv/bin/python benchmarks/bench_turn_cpu.py --instructions --turns 100 --rounds 1 \\
        --before SRC [--http]
    .venv/bin/python benchmarks/bench_turn_cpu.py --http --turns 500 --rounds 1 \\
        --store sqlite --profile /tmp/turn.prof
    .venv/bin/python benchmarks/bench_turn_cpu.py --http --instructions --turns 300 \\
        --rounds 1 --loop asyncio,uvloop
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from _collector import settle_collector
from _fleet import enqueue
from _loops import PRODUCT, loop_names
from _loops import run as run_on
from _stores import stores
from tests.compose import open_plane, serving, static_app
from tests.unit.control.harness import DEFAULT_LIMITS

from helmr.control.control import Control
from helmr.protocol import routes
from helmr.protocol.contract import EPOCH_HEADER, PROTOCOL
from helmr.server import Grant, StaticRunnerTokens, User

WARM_UP = 200
RECEIVE_WAIT = 60.0
"""Seconds a receive may wait: long enough for a child under valgrind."""


TOKEN = "bench"
"""The client's bearer token and every Session's runner token (``--http``)."""


@dataclass
class Api:
    """The child's REST API (``--http``), as ``_fleet.enqueue`` calls it."""

    url: str
    token: str = TOKEN


@contextmanager
def profiled(path: str | None) -> Iterator[None]:
    """cProfile over the block, in this thread, its stats written to ``path`` (if given)."""
    if path is None:
        yield
        return
    profile = cProfile.Profile(time.thread_time)  # this thread's CPU, not the waits
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(path)


async def open_sessions(control: Control, sessions: int) -> dict[str, int]:
    """``sessions`` new Sessions as the operator leaves them: their limits resolved
    (an Actor's defaults: the enqueue checks the queue limit, as in production),
    their processes started and prepared. Each one's epoch."""
    epochs = {}
    for i in range(sessions):
        view = await control.open_session(
            namespace="bench", name=f"s{i}", actor="noop", workspace=f"ws{i}"
        )
        await control.resolve_limits(view.id, DEFAULT_LIMITS)
        epochs[view.id] = epoch = await control.process_started(view.id)
        await control.process_prepared(view.id, epoch)
    return epochs


async def turns(
    store: str, sessions: int, count: int, gated: bool, profile: str | None = None
) -> float:
    """CPU seconds per Turn of ``count`` no-op Turns after a warm-up, in this process.
    ``gated``: prints ``ready`` after the warm-up and waits for a line on stdin first
    (``--instructions`` starts counting then), and ends the process right after."""
    async with open_plane(store) as plane:
        control = plane.control
        epochs = await open_sessions(control, sessions)
        ids = list(epochs)

        async def one(n: int) -> None:
            session_id = ids[n % len(ids)]
            epoch = epochs[session_id]
            _, turn = await control.enqueue_answering_session(session_id, "noop")
            running = await control.receive(session_id, epoch, RECEIVE_WAIT)
            if running is None or running.id != turn.id:
                raise RuntimeError(f"receive answered {running!r}, not turn {turn.id}")
            await control.complete(session_id, epoch, turn.id)

        settle_collector()
        for n in range(WARM_UP):
            await one(n)
        if gated:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        with profiled(profile):
            began = time.process_time()
            for n in range(count):
                await one(n)
            spent = (time.process_time() - began) / count
        if gated:
            print(spent, flush=True)
            os._exit(0)  # what closing the store costs is not counted
        return spent


async def serve(store: str, sessions: int, profile: str | None) -> None:
    """``--http``'s child: serves the REST and runner API over its Control and prints
    its URL, each Session's epoch and its runner protocol revision (a JSON line); then
    counts its CPU from a line on stdin (answered ``counting``) to the next, prints it
    and ends the process."""
    async with open_plane(store) as plane:
        epochs = await open_sessions(plane.control, sessions)
        runner_tokens = StaticRunnerTokens(dict.fromkeys(epochs, TOKEN))
        app = static_app(plane.control, {TOKEN: Grant(User("bench"))}, runner_tokens)
        settle_collector()
        async with serving(app) as url:
            hello = {"url": url, "epochs": epochs, "protocol": PROTOCOL}
            print(json.dumps(hello), flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            with profiled(profile):
                began = time.process_time()
                print("counting", flush=True)
                await asyncio.to_thread(sys.stdin.readline)
                spent = time.process_time() - began
            print(spent, flush=True)
            os._exit(0)  # what closing the store costs is not counted


class HttpRunner:
    """One Session's runner over HTTP, one Turn at a time, in the protocol revision the
    child speaks, as the runner SDK speaks it to an actor that loops: its request that
    will bring the next Turn is always out (a ``receive`` long poll, or from revision 5
    the settlement's held reply) when that Turn is enqueued."""

    def __init__(
        self, http: aiohttp.ClientSession, url: str, session_id: str, epoch: int, protocol: int
    ) -> None:
        self._http = http
        self._url = url
        self._session_id = session_id
        self._headers = {EPOCH_HEADER: str(epoch), "Authorization": f"Bearer {TOKEN}"}
        self._protocol = protocol
        self._next = asyncio.create_task(self._receive())

    async def run(self, turn_id: str) -> None:
        """Gets ``turn_id`` (enqueued just now) and completes it; returns once the
        completion has committed, with the request for the next Turn out."""
        running = await self._next
        if running.get("id") != turn_id:
            raise RuntimeError(f"the runner got {running!r}, not turn {turn_id}")
        settle: dict[str, Any] = {}
        if self._protocol >= 3:  # the SDK asks for the next turn with the settlement
            settle["next"] = {"timeout": RECEIVE_WAIT} if self._protocol >= 5 else {}
        path = self._url + routes.complete(self._session_id, turn_id)
        done = await self._http.post(path, json=settle, headers=self._headers)
        done.raise_for_status()  # the head: the completion has committed
        self._next = asyncio.create_task(self._given(done))

    async def close(self) -> None:
        """Ends the request out (the child has ended: its error is expected)."""
        self._next.cancel()
        await asyncio.gather(self._next, return_exceptions=True)

    async def _given(self, done: aiohttp.ClientResponse) -> dict[str, Any]:
        """The next Turn from a settlement's reply, or a ``receive``'s when it has none."""
        async with done:
            settled: dict[str, Any] = await done.json()
        given: dict[str, Any] | None = settled.get("next")
        return await self._receive() if given is None else given

    async def _receive(self) -> dict[str, Any]:
        url = self._url + routes.receive(self._session_id)
        while True:  # as the SDK: a window with no turn (408) is asked again
            body = {"timeout": RECEIVE_WAIT}
            async with self._http.post(url, json=body, headers=self._headers) as answer:
                if answer.status == 408:
                    continue
                answer.raise_for_status()
                running: dict[str, Any] = await answer.json()
                return running


async def http_turns(
    http: aiohttp.ClientSession, url: str, runners: dict[str, HttpRunner], first: int, count: int
) -> None:
    """``count`` no-op Turns over HTTP, one at a time, over the Sessions in turn: the
    client's enqueue, then its Session's runner (keep-alive connections, as a runner's)."""
    ids = list(runners)
    for n in range(first, first + count):
        session_id = ids[n % len(ids)]
        await runners[session_id].run(await enqueue(http, Api(url), session_id))


async def drive(process: subprocess.Popen[str], args: argparse.Namespace) -> str:
    """``--http``'s Turns against the serving child ``process``: the warm-up, then the
    counted ones; the child's last output. One event loop for both, so the runners'
    requests out at the warm-up's end bring the counted Turns."""
    assert process.stdin is not None
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("{"):
        raise RuntimeError(f"the child did not serve: {process.communicate()[1]}")
    hello = json.loads(line)
    url = hello["url"]
    sent = 0

    async def count(*_: object) -> None:
        nonlocal sent
        sent += 1

    tracing = aiohttp.TraceConfig()
    tracing.on_request_start.append(count)
    async with aiohttp.ClientSession(trace_configs=[tracing]) as http:
        runners = {
            session_id: HttpRunner(http, url, session_id, epoch, hello["protocol"])
            for session_id, epoch in hello["epochs"].items()
        }
        try:
            await http_turns(http, url, runners, 0, WARM_UP)
            if args.instructions:
                start_counting(process)
            process.stdin.write("go\n")
            process.stdin.flush()
            if process.stdout.readline().strip() != "counting":
                raise RuntimeError(f"the child did not count: {process.communicate()[1]}")
            counted_from = sent
            await http_turns(http, url, runners, WARM_UP, args.turns)
            requests = (sent - counted_from) / args.turns
            print(f"protocol {hello['protocol']}: {requests:.2f} requests per turn", flush=True)
            # Before this process's connections close: the child stops counting first.
            output, errors = process.communicate("stop\n")
        finally:
            for runner in runners.values():
                await runner.close()
    return output if not args.instructions else errors


def run_served(command: list[str], env: dict[str, str] | None, args: argparse.Namespace) -> float:
    """``--http``: the child serves, this process makes the Turns; the child's CPU
    seconds per Turn, or the instructions it ran per Turn (``--instructions``)."""
    if not args.instructions:
        with piped([*command, "--http"], env) as process:
            reported = asyncio.run(drive(process, args))
        return float(reported.split()[-1]) / float(args.turns)
    with tempfile.TemporaryDirectory(prefix="helmr-callgrind-") as out:
        with piped([*valgrind(out), *command, "--http"], env) as process:
            reported = asyncio.run(drive(process, args))
        return counted(reported, out, args)


def valgrind(out: str) -> list[str]:
    """Callgrind, counting from ``start_counting`` on, each thread's count in a file of
    ``out`` (the event loop's thread is the first)."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--separate-threads=yes",
        f"--callgrind-out-file={out}/callgrind.%p",
    ]


def counted(errors: str, out: str, args: argparse.Namespace) -> float:
    """Instructions per Turn: the whole process's, or with ``--loop-thread`` the event
    loop's thread's alone (the API's work, without the store's threads, whose counts
    move with how their work interleaves with the loop's); the other is printed."""
    total = collected(errors) / float(args.turns)
    [first] = Path(out).glob("callgrind.*-01")  # thread 1: the main thread, the loop's
    found = re.search(r"^(?:summary|totals): (\d+)", first.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"callgrind wrote no total in {first}")
    loop = int(found.group(1)) / float(args.turns)
    print(f"  {total * 1e-6:.3f} M instructions per turn, {loop * 1e-6:.3f} M on the loop's thread")
    return loop if args.loop_thread else total


def piped(command: list[str], env: dict[str, str] | None) -> subprocess.Popen[str]:
    """A child with its stdin, stdout and stderr piped to this process, as text."""
    pipe = subprocess.PIPE
    return subprocess.Popen(command, env=env, stdin=pipe, stdout=pipe, stderr=pipe, text=True)


def start_counting(process: subprocess.Popen[str]) -> None:
    """Callgrind counts the child's instructions from now on."""
    control = ["callgrind_control", "--instr=on", str(process.pid)]
    subprocess.run(control, check=True, capture_output=True)


def collected(errors: str) -> int:
    """The instructions callgrind counted, from its report on stderr."""
    found = re.search(r"Collected : (\d+)", errors)
    if found is None:
        raise RuntimeError(f"callgrind counted nothing: {errors}")
    return int(found.group(1))


def child(args: argparse.Namespace) -> None:
    [loop] = args.loops
    if args.http:
        run_on(serve(args.child, args.sessions, args.profile), loop)
        return
    spent = run_on(turns(args.child, args.sessions, args.turns, args.gated, args.profile), loop)
    print(spent, flush=True)


@dataclass(frozen=True)
class Variant:
    """What one child runs: a version's ``src`` (None: this checkout's) on an event loop."""

    code: str
    src: Path | None
    loop: str


def variants(args: argparse.Namespace) -> list[Variant]:
    """Each version (``--before``'s, this checkout's) on each of ``--loop``'s loops."""
    versions: dict[str, Path | None] = {"this checkout": None}
    if args.before is not None:
        versions = {"before": args.before, **versions}
    return [Variant(code, src, loop) for code, src in versions.items() for loop in args.loops]


def run_version(store: str, args: argparse.Namespace, variant: Variant) -> float:
    """One child process on ``store``: its CPU seconds per Turn, or with
    ``--instructions`` the instructions it ran per Turn (valgrind's callgrind counts
    them from the end of the warm-up: the same code runs the same count, whatever
    the machine's load)."""
    src = variant.src
    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--child", store, "--loop", variant.loop]
    command += ["--sessions", str(args.sessions), "--turns", str(args.turns)]
    if args.profile is not None:
        command += ["--profile", args.profile]
    if args.http:
        return run_served(command, env, args)
    if not args.instructions:
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        return float(output.stdout.split()[-1])
    with tempfile.TemporaryDirectory(prefix="helmr-callgrind-") as out:
        with piped([*valgrind(out), *command, "--gated"], env) as process:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the child did not warm up: {process.communicate()[1]}")
            start_counting(process)
            _, errors = process.communicate("go\n")
        return counted(errors, out, args)


def compare(kind: str, new_store: Callable[[], Any], args: argparse.Namespace) -> None:
    runs = variants(args)
    spent: dict[Variant, list[float]] = {variant: [] for variant in runs}
    for _ in range(args.rounds):
        for variant in runs:
            with new_store() as store:
                spent[variant].append(run_version(store, args, variant))
            if args.profile is not None:  # each child writes over the last one's
                print(f"{kind}, {variant.code}, {variant.loop}:")
                print_profile(args.profile, args.turns)
    scale, unit = (1e-6, "M instructions") if args.instructions else (1e3, "ms CPU")
    for variant, values in spent.items():
        each = ", ".join(f"{v * scale:.3f}" for v in values)
        median = statistics.median(values) * scale
        name = f"{variant.code}, {variant.loop}"
        print(f"{kind}, {name}: {median:.3f} {unit} per turn (median; each: {each})")
    first = args.loops[0]
    for after in runs:
        # after / before on the same loop; each other loop / the first on the same version
        if after.code == "this checkout" and args.before is not None:
            before = Variant("before", args.before, after.loop)
            print_ratios(f"{kind}, {after.loop}, after / before", spent[before], spent[after])
        if after.loop != first:
            base = Variant(after.code, after.src, first)
            print_ratios(f"{kind}, {after.code}, {after.loop} / {first}", spent[base], spent[after])


def print_ratios(what: str, before: list[float], after: list[float]) -> None:
    """Each round's ratio ``after`` / ``before``, and their median."""
    ratios = [a / b for b, a in zip(before, after, strict=True)]
    each = ", ".join(f"{r:.3f}" for r in ratios)
    print(f"{what}: {statistics.median(ratios):.3f} (each pair: {each})")


def print_profile(path: str, turns: int, top: int = 30) -> None:
    """The functions that took the most time of the last child's counted Turns (its
    own time, not its callees'), with their calls per Turn."""
    profile = pstats.Stats(path).get_stats_profile()
    rows = sorted(profile.func_profiles.items(), key=lambda item: item[1].tottime, reverse=True)
    total = profile.total_tt
    print(f"profile of {turns} turns, {total / turns * 1e3:.3f} ms per turn in the event loop")
    for name, row in rows[:top]:
        calls = int(row.ncalls.split("/")[0])  # "total/primitive" for a recursive one
        where = f"{Path(row.file_name).name}:{row.line_number}({name})"
        print(
            f"  {row.tottime / total:6.1%} own {row.cumtime / total:6.1%} cum"
            f" {calls / turns:7.2f} calls/turn  {where}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite,postgres")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the src directory of a version to compare")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per turn with valgrind's callgrind instead of CPU time",
    )
    parser.add_argument(
        "--loop-thread",
        action="store_true",
        help="with --instructions: compare the event loop's thread's instructions alone",
    )
    parser.add_argument(
        "--http", action="store_true", help="through the REST and runner API, over HTTP"
    )
    parser.add_argument(
        "--profile", help="cProfile the counted Turns' event loop thread into this file"
    )
    parser.add_argument(
        "--loop",
        dest="loops",
        type=loop_names,
        default=[PRODUCT],
        help="the control plane's event loops, comma-separated (asyncio, uvloop), each in turn;"
        f" default: the product's ({PRODUCT})",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--gated", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return
    print(f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    with stores(args.store.split(",")) as factories:
        for kind, factory in factories:
            compare(kind, factory, args)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
