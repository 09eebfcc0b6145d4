"""The control plane's periodic heap trim gives freed memory back to the system."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from helmr.operator import heap_trim
from helmr.operator.heap_trim import malloc_trim, trim_heap_periodically


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise LookupError("no VmRSS")


def _freed_below_live_chunks() -> list[bytearray]:
    """About 55 MiB freed in glibc's heap, below chunks still alive: what ``free``
    alone keeps (objects over 512 bytes come from malloc, under its mmap threshold)."""
    chunks = [bytearray(4000) for _ in range(15_000)]
    return chunks[::16]


async def test_a_trim_returns_freed_heap_memory() -> None:
    if malloc_trim() is None:
        pytest.skip("this C library has no malloc_trim")
    kept = _freed_below_live_chunks()
    before = _rss_mib()
    trimming = asyncio.create_task(trim_heap_periodically(interval=0.01))
    await asyncio.sleep(0.5)
    trimming.cancel()
    after = _rss_mib()
    assert len(kept) > 0
    assert before - after > 30, f"RSS {before:.0f} -> {after:.0f} MiB"


async def test_no_malloc_trim_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap_trim, "malloc_trim", lambda: None)
    await asyncio.wait_for(trim_heap_periodically(interval=0.01), 1)
