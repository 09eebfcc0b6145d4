"""The event loops a test may run on: asyncio's, and the operator's (``kopf run`` takes
uvloop, whose transports, for one, are no ``asyncio.Transport``)."""

from __future__ import annotations

import asyncio

import uvloop
from pytest_asyncio.plugin import LoopFactory

BOTH: dict[str, LoopFactory] = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
"""For ``pytest_asyncio_loop_factories``: each test of a directory on both."""


def on_uvloop() -> bool:
    return isinstance(asyncio.get_running_loop(), uvloop.Loop)
