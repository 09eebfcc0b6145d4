"""Gives the control plane's freed heap memory back to the system now and then.

glibc's ``free`` returns memory to the system only from the top of a heap; what is
freed below live chunks stays in the process's RSS. The control plane frees in
bursts (a restart's listings, every runner reconnecting, a status pass over every
Session, finished requests), so that memory builds up. ``malloc_trim(0)`` releases
the free pages anywhere in glibc's heaps: what it gives back per open Session is
measured by ``benchmarks/bench_operator_memory.py --trim`` (docs/sizing.md). Where
the C library has no ``malloc_trim`` (musl), nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_INTERVAL = 30.0
"""Seconds between trims. A trim takes about 10 ms per 50 MiB freed (in a worker
thread; ctypes lets go of the interpreter lock while glibc works)."""


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the process's C library has none."""
    try:
        libc = ctypes.CDLL(None)  # the C library this process already uses
    except OSError:
        return None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)
    return trim


async def trim_heap_periodically(interval: float = TRIM_INTERVAL) -> None:
    """Calls ``malloc_trim(0)`` every ``interval`` seconds, off the event loop."""
    trim = malloc_trim()
    if trim is None:
        log.info("no malloc_trim in this C library: freed heap memory is not trimmed")
        return
    while True:
        await asyncio.sleep(interval)
        await asyncio.to_thread(trim, 0)
