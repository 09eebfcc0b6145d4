"""``helmr dev`` from a cold shell to the first ``turn.running`` of a new session.

Each run starts ``helmr dev examples/echo`` as a new process (a fresh interpreter,
a fresh store and Workspace directory), reads the API URL and token it prints,
starts a session with the Python client, enqueues a turn and follows the
session's events until ``turn.running``: the runner process started, imported
the actor, and received the turn. Timed from the ``helmr dev`` process's start,
with the steps on the way, and the CPU time ``helmr dev`` used until it listened
(its imports, mostly: what a loaded machine stretches into seconds of wall time).
Figures are printed, never asserted; compare them with ``bench_session_loop.py``'s
"session start → first turn.running" on the local cluster, measured at the same
load.

``--before SRC`` compares another version of Helmr in the same run: ``SRC`` is its
``src`` directory (``git worktree add /tmp/before REV``: ``/tmp/before/src``), put
first on ``helmr dev``'s ``PYTHONPATH`` (its runners inherit it). Runs alternate
between the two, so both see the same load, and the table gives each step's p50
for both and their ratio. Each version runs once before the timed runs, and
``PYTHONDONTWRITEBYTECODE`` is dropped, so that both start from compiled
bytecode, as an installed package does (without it, compiling Helmr's own
modules costs each start about 0.25 s of CPU).

    .venv/bin/python benchmarks/bench_dev_cold_start.py [--runs 10] [--before SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from helmr.client import Client

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "examples" / "echo"


async def one_run(src: Path | None = None) -> dict[str, float]:
    """One cold start of ``helmr dev``: this checkout's, or the one whose ``src`` is given."""
    helmr = Path(sys.executable).parent / "helmr"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as state:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            str(helmr),
            "dev",
            str(ECHO),
            "--port",
            "0",
            "--root",
            state,
            "--no-reload",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        assert process.stdout is not None
        url = token = ""
        while not (url and token):
            line = (await process.stdout.readline()).decode()
            if not line:
                raise RuntimeError("helmr dev ended before it printed its API")
            key, _, value = line.strip().partition(":")
            if key == "API":
                url = value.strip()
            elif key == "Token":
                token = value.strip()
        listening = time.monotonic()
        cpu = _cpu_seconds(process.pid)
        try:
            async with Client(url, token) as client:
                session, _ = await client.actors.start("echo", namespace="default", workspace="w")
                session_started = time.monotonic()
                await session.enqueue("hello")
                async for event in session.events.stream():
                    if event.kind == "turn.running":
                        break
                running = time.monotonic()
        finally:
            process.send_signal(signal.SIGINT)
            await process.wait()
    return {
        "helmr dev's CPU time until listening": cpu,
        "cold shell → API listening": listening - started,
        "cold shell → session started": session_started - started,
        "session start → first turn.running": running - session_started,
        "cold shell → first turn.running": running - started,
    }


def _cpu_seconds(pid: int) -> float:
    """The user and system CPU time ``pid`` has used (Linux ``/proc``): what its
    start costs whatever the machine's load, unlike its wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(runs: int, before: Path | None) -> None:
    versions: dict[str, Path | None] = {"this checkout": None}
    if before is not None:
        versions = {f"before ({before})": before, **versions}
    for src in versions.values():
        await one_run(src)  # its bytecode written, as an installed package's is
    results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    for _ in range(runs):
        for name, src in versions.items():
            results[name].append(await one_run(src))
    print(f"helmr dev, {runs} runs each, load average {os.getloadavg()[0]:.1f} at the end")
    names = list(results)
    header = " | ".join(f"{name} p50 | min | max" for name in names)
    ratio = " | after / before" if len(names) == 2 else ""
    print(f"| step | {header}{ratio} |")
    print("|---" * (1 + 3 * len(names) + (1 if ratio else 0)) + "|")
    for step in results[names[-1]][0]:
        cells, medians = [], []
        for name in names:
            values = [r[step] * 1000 for r in results[name]]
            medians.append(statistics.median(values))
            cells.append(f"{medians[-1]:.0f} ms | {min(values):.0f} ms | {max(values):.0f} ms")
        ratio_cell = f" | {medians[1] / medians[0]:.2f}x" if ratio else ""
        print(f"| {step} | {' | '.join(cells)}{ratio_cell} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", type=Path, help="the src directory of a version to compare")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.before))
