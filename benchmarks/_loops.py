"""The event loops a benchmark's control plane can run on (``--loop``), by name: the
standard library's, and uvloop's (libuv, in C), which ``kopf run`` picks by itself
when it is installed. The benchmark chooses, not the code measured, so ``--before``
trees that predate uvloop run on either too."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}

PRODUCT = "uvloop"
"""The loop a benchmark's control plane runs on unless told otherwise: the one
``kopf run`` picks in the operator image (and ``helmr dev`` takes), so that what is
measured is what runs (docs/sizing.md's figures before 5 December ran on asyncio's)."""


def run(main: Coroutine[Any, Any, T], loop: str) -> T:
    """``asyncio.run(main)`` on the loop named ``loop``."""
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(main)


def loop_names(text: str) -> list[str]:
    """``--loop``'s comma-separated names, each one of :data:`LOOPS`."""
    names = text.split(",")
    unknown = [name for name in names if name not in LOOPS]
    if unknown:
        raise ValueError(f"unknown loop {', '.join(unknown)}: one of {', '.join(LOOPS)}")
    return names
