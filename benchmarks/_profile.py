"""Sampling profiles of benchmark processes (py-spy, from PyPI: ``pip install py-spy``),
summarised by what the samples were doing: ``bench_scale.py replicas --profile``.

Samples are taken only of threads holding the GIL (``--gil``): on a control plane
bound by its CPU that is the work that competes for it. Each sample's stack goes to
the first category one of its frames names (:data:`CATEGORIES`, in order), so the
shares add up to the whole.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections import Counter
from pathlib import Path

CATEGORIES = (
    ("status mirror (either thread)", ("helmr/operator/mirror", "helmr/control/mirror_reads")),
    ("change feed (its connection's thread, its wake-ups)", ("helmr/store/postgres_feed",)),
    ("store threads: transactions (psycopg, SQL, rows)", ("concurrent/futures/thread.py",)),
    ("event loop: HTTP (aiohttp, Helmr's routes, inputs, answers)", ("aiohttp/",)),
    ("event loop: Control and the store's hand-offs", ("helmr/control/", "helmr/store/")),
    ("event loop: asyncio itself", ("asyncio/",)),
)
"""Checked in order: the mirror and the feed wherever they run, then the store's
worker threads, then the event loop's thread by what it was in."""


def available() -> str | None:
    """py-spy's path: on PATH, or beside this Python (installed in its venv)."""
    return shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))


async def record(pid: int, seconds: float, output: Path) -> asyncio.subprocess.Process:
    """Starts sampling ``pid`` for ``seconds`` into ``output`` (collapsed stacks)."""
    spy = available()
    if spy is None:
        raise SystemExit("--profile needs py-spy on PATH (pip install py-spy)")
    return await asyncio.create_subprocess_exec(
        *(spy, "record", "--pid", str(pid), "--duration", str(round(seconds))),
        *("--rate", "100", "--gil", "--nonblocking", "--format", "raw"),
        *("--output", str(output)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


def shares(path: Path) -> tuple[int, Counter[str]]:
    """The samples in ``path`` and their count per category."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        counts[_category(stack)] += int(n)
    return total, counts


def _category(stack: str) -> str:
    for name, markers in CATEGORIES:
        if any(marker in stack for marker in markers):
            return name
    return "other"
