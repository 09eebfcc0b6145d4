"""A probe ``kopf run`` loads beside ``helmr.operator`` (``-m _heap_probe``) for
``bench_operator_memory.py``: where the control plane's memory goes.

On each SIGUSR1 it writes, into the directory ``HELMR_BENCH_PROBE_DIR``, the
live objects counted by type (``types-<n>.json``: kopf's per-object records,
asyncio tasks, dicts, ...). The first signal also starts tracemalloc (with
``HELMR_BENCH_TRACE_FRAMES`` frames; 0: never), and each later one dumps a
snapshot (``heap-<n>.snapshot``): everything allocated since the first signal
and still alive. With ``HELMR_BENCH_TRIM`` set, each signal then asks glibc to
return its free memory (``malloc_trim(0)``) and writes the RSS before and after
(``trim-<n>.json``): how much of the RSS is freed memory glibc kept. Each
signal also writes the allocators' own accounts (``alloc-<n>.json``): Python's
object allocator (pymalloc: its arenas, and the bytes in live blocks within
them) and glibc's heap (in use, free but kept, large blocks mapped apart),
which together tell live objects from fragmentation. The
snapshot is taken on the event loop, which it stops for as long as it takes: a
benchmark's cost, never a product's.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import logging
import os
import re
import signal
import sys
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import kopf

log = logging.getLogger(__name__)


def _type_name(kind: type) -> str:
    # A metaclass's ``__module__`` may be a descriptor, not a string.
    return f"{kind.__dict__.get('__module__', '?')}.{kind.__qualname__}"


class _Probe:
    def __init__(self, directory: Path, frames: int) -> None:
        self.directory = directory
        self.frames = frames
        self.count = 0

    def signalled(self) -> None:
        self.count += 1
        gc.collect()
        types = Counter(_type_name(type(o)) for o in gc.get_objects())
        path = self.directory / f"types-{self.count}.json"
        path.write_text(json.dumps(dict(types.most_common(400))))
        if self.frames and tracemalloc.is_tracing():
            tracemalloc.take_snapshot().dump(str(self.directory / f"heap-{self.count}.snapshot"))
        elif self.frames:
            tracemalloc.start(self.frames)
        if os.environ.get("HELMR_BENCH_TRIM"):
            before = _rss_kib()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            trimmed = {"before_kib": before, "after_kib": _rss_kib()}
            (self.directory / f"trim-{self.count}.json").write_text(json.dumps(trimmed))
        (self.directory / f"alloc-{self.count}.json").write_text(json.dumps(_allocators()))
        log.warning("heap probe %d written", self.count)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


def _pymalloc_stats() -> str:
    """``sys._debugmallocstats()``'s report: it writes to the C stderr only."""
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        return out.read()


def _allocators() -> dict[str, int]:
    """KiB: RSS; pymalloc's arenas (mapped apart from glibc's heap) and its live
    blocks; glibc's heap, its blocks in use and its free blocks kept, and its large
    blocks mapped apart."""
    stats = _pymalloc_stats()
    arenas = re.search(r"(\d+) arenas \* (\d+) bytes/arena", stats)
    used = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", stats)
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {
        "rss": _rss_kib(),
        "pymalloc_arenas": int(arenas[1]) * int(arenas[2]) // 1024 if arenas else -1,
        "pymalloc_used": int(used[1].replace(",", "")) // 1024 if used else -1,
        "glibc_heap": info.arena // 1024,
        "glibc_used": info.uordblks // 1024,
        "glibc_free": info.fordblks // 1024,
        "glibc_mapped": info.hblkhd // 1024,
    }


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError("no VmRSS")


@kopf.on.startup()
async def heap_probe(**_: Any) -> None:
    directory = Path(os.environ["HELMR_BENCH_PROBE_DIR"])
    probe = _Probe(directory, int(os.environ.get("HELMR_BENCH_TRACE_FRAMES", "0")))
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, probe.signalled)
