"""The runner's tests against the real app (the ``api`` fixture) run against both
servers of the runner API: aiohttp's beside the public API on asyncio's loop, and the
runner port's own (``helmr.server.runner_server``) on the operator's loop, uvloop, as
the chart and ``kopf run`` serve it. (The runner itself runs on asyncio's loop.)"""

from __future__ import annotations

import asyncio

import pytest
from pytest_asyncio.plugin import LoopFactory

from tests.unit.loops import BOTH, on_uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, LoopFactory]:
    if "api" in getattr(item, "fixturenames", ()):
        return BOTH
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture
async def runner_port() -> bool:
    return on_uvloop()
