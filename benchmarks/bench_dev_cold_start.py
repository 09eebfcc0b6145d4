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

    .venv/bin/python benchmarks/bench_dev_cold_start.py [--runs 10]
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


async def one_run() -> dict[str, float]:
    helmr = Path(sys.executable).parent / "helmr"
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


async def main(runs: int) -> None:
    results = [await one_run() for _ in range(runs)]
    print(f"helmr dev, {runs} runs, load average {os.getloadavg()[0]:.1f}")
    print("| step | p50 | min | max |\n|---|---|---|---|")
    for step in results[0]:
        values = [r[step] * 1000 for r in results]
        print(
            f"| {step} | {statistics.median(values):.0f} ms"
            f" | {min(values):.0f} ms | {max(values):.0f} ms |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    asyncio.run(main(parser.parse_args().runs))
