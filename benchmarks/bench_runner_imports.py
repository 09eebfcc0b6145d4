"""What a runner process pays in imports before its first ``receive``, on this host.

Each sample is a fresh interpreter (this venv's Python, this checkout's ``src``
and ``examples``) timing ``import helmr.runner.entrypoint, echo.echo`` (what
``python -m helmr.runner`` imports before it can ask for a turn, with the echo
actor) in wall and CPU time, beside the standard library's share of it (asyncio
and the modules the runner uses). CPU time is the steadier figure on a machine
shared with other work; the runner image's compiled layout (``pip --target``,
``compileall``) gives the same figures within a few milliseconds.
Figures are printed, never asserted (``tests/unit/runner/test_imports.py``
guards which modules are imported, not how long they take).

    .venv/bin/python benchmarks/bench_runner_imports.py [--samples 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATEMENTS = {
    "stdlib the runner uses (asyncio, json, logging, uuid, urllib)": (
        "import asyncio, json, logging, uuid, urllib.parse"
    ),
    "runner entrypoint + echo actor": "import helmr.runner.entrypoint, echo.echo",
}
TIMED = (
    "import time; w = time.perf_counter(); c = time.process_time(); {statement}; "
    "print((time.perf_counter() - w) * 1000, (time.process_time() - c) * 1000)"
)


def sample(statement: str) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO / 'examples'}"}
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(statement=statement)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = map(float, out.stdout.split())
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    # Interleaved, so both statements share whatever else the machine is doing.
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in STATEMENTS}
    for _ in range(args.samples):
        for name, statement in STATEMENTS.items():
            samples[name].append(sample(statement))
    print(f"{'imports':62} {'wall p50 ms':>12} {'cpu p50 ms':>11}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{name:62} {wall:12.1f} {cpu:11.1f}")


if __name__ == "__main__":
    main()
