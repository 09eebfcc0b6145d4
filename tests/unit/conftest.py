"""The two compositions most unit tests start from (``h``: a store and the
Control over it; ``api``: that plus the REST app served on loopback).

A module changes how ``h`` is built by overriding ``clock``,
``control_config`` or ``retention``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helmr.control import ControlConfig
from helmr.server import StaticRunnerTokens
from tests.compose import Clock, open_plane, static_app
from tests.unit.api import GRANTS, Api, RecordingMirror
from tests.unit.control.harness import Harness


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def control_config() -> ControlConfig:
    return ControlConfig()


@pytest.fixture
def retention() -> timedelta | None:
    return None


@pytest.fixture
async def h(
    tmp_path: Path, clock: Clock, control_config: ControlConfig, retention: timedelta | None
) -> AsyncIterator[Harness]:
    path = tmp_path / "helmr.db"
    async with Harness.open(path, clock=clock, config=control_config, retention=retention) as h:
        yield h


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with open_plane(tmp_path / "timeline.db") as plane:
        tokens = StaticRunnerTokens()
        mirror = RecordingMirror()
        app = static_app(
            plane.control, GRANTS, tokens, mirror=mirror, workspaces=mirror, keepalive=0.05
        )
        async with TestClient(TestServer(app)) as http:
            yield Api(plane.control, app, http, tokens, mirror)
