"""The control plane's CPU per no-op Turn in Control and the store alone: no HTTP, no
status mirror, one Turn at a time (issue 31).

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

``--before SRC`` runs another version's ``src`` (``git worktree add /tmp/before REV``:
``/tmp/before/src``) the same way, alternating (``--rounds`` pairs), and prints each
pair's ratio after / before and their median.

    .venv/bin/python benchmarks/bench_turn_cpu.py [--turns 2000] [--store sqlite,postgres] \\
        [--before SRC --rounds 5]
    .venv/bin/python benchmarks/bench_turn_cpu.py --instructions --turns 100 --rounds 1 \\
        --before SRC
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stores import stores
from tests.compose import open_plane

WARM_UP = 200
RECEIVE_WAIT = 60.0
"""Seconds a receive may wait: long enough for a child under valgrind."""


async def turns(store: str, sessions: int, count: int, gated: bool) -> float:
    """CPU seconds per Turn of ``count`` no-op Turns after a warm-up, in this process.
    ``gated``: prints ``ready`` after the warm-up and waits for a line on stdin first
    (``--instructions`` starts counting then), and ends the process right after."""
    async with open_plane(store) as plane:
        control = plane.control
        epochs = {}
        for i in range(sessions):
            view = await control.open_session(
                namespace="bench", name=f"s{i}", actor="noop", workspace=f"ws{i}"
            )
            epochs[view.id] = await control.process_started(view.id)
        ids = list(epochs)

        async def one(n: int) -> None:
            session_id = ids[n % len(ids)]
            epoch = epochs[session_id]
            _, turn = await control.enqueue_answering_session(session_id, "noop")
            running = await control.receive(session_id, epoch, RECEIVE_WAIT)
            if running is None or running.id != turn.id:
                raise RuntimeError(f"receive answered {running!r}, not turn {turn.id}")
            await control.complete(session_id, epoch, turn.id)

        for n in range(WARM_UP):
            await one(n)
        if gated:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        began = time.process_time()
        for n in range(count):
            await one(n)
        spent = (time.process_time() - began) / count
        if gated:
            print(spent, flush=True)
            os._exit(0)  # what closing the store costs is not counted
        return spent


def child(args: argparse.Namespace) -> None:
    print(asyncio.run(turns(args.child, args.sessions, args.turns, args.gated)), flush=True)


def run_version(store: str, args: argparse.Namespace, src: Path | None) -> float:
    """One child process on ``store``: its CPU seconds per Turn, or with
    ``--instructions`` the instructions it ran per Turn (valgrind's callgrind counts
    them from the end of the warm-up: the same code runs the same count, whatever
    the machine's load)."""
    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--child", store]
    command += ["--sessions", str(args.sessions), "--turns", str(args.turns)]
    if not args.instructions:
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        return float(output.stdout.split()[-1])
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    valgrind += ["--callgrind-out-file=/dev/null"]
    with subprocess.Popen(
        [*valgrind, *command, "--gated"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the child did not warm up: {process.communicate()[1]}")
        control = ["callgrind_control", "--instr=on", str(process.pid)]
        subprocess.run(control, check=True, capture_output=True)
        _, errors = process.communicate("go\n")
    collected = re.search(r"Collected : (\d+)", errors)
    if collected is None:
        raise RuntimeError(f"callgrind counted nothing: {errors}")
    return int(collected.group(1)) / float(args.turns)


def compare(kind: str, new_store: Callable[[], Any], args: argparse.Namespace) -> None:
    versions: dict[str, Path | None] = {"this checkout": None}
    if args.before is not None:
        versions = {"before": args.before, **versions}
    spent: dict[str, list[float]] = {name: [] for name in versions}
    for _ in range(args.rounds):
        for name, src in versions.items():
            with new_store() as store:
                spent[name].append(run_version(store, args, src))
    scale, unit = (1e-6, "M instructions") if args.instructions else (1e3, "ms CPU")
    for name, values in spent.items():
        each = ", ".join(f"{v * scale:.3f}" for v in values)
        median = statistics.median(values) * scale
        print(f"{kind}, {name}: {median:.3f} {unit} per turn (median; each: {each})")
    if args.before is not None:
        ratios = [a / b for b, a in zip(spent["before"], spent["this checkout"], strict=True)]
        each = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"{kind}, after / before: {statistics.median(ratios):.3f} (each pair: {each})")


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
