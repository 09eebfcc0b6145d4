"""What every unit test shares: a 30 s timeout, the helm gate, and the two
compositions most tests start from (``h``: a store and the Control over it;
``api``: that plus the REST app served on loopback).

A module changes how ``h`` is built by overriding ``clock``,
``control_config`` or ``retention``.
"""

from __future__ import annotations

import os
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
from tests.unit.helm import BUILT, find_helm

# A unit test takes a few seconds at most; one that hangs should fail fast,
# not after the 600 s the cluster tests need (pyproject.toml).
UNIT_TIMEOUT = 30
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The hook sees every collected item, the cluster tests' too: keep to ours.
    # Appended, so a test's own timeout marker stays the closest one.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("helm") is None or find_helm() is not None:
        return
    missing = f"helm is neither on PATH nor at {BUILT}; build it with `make build`"
    # `make test` (and so CI) sets this: there, a skip would let a broken chart through.
    if os.environ.get("HELMR_REQUIRE_HELM"):
        pytest.fail(missing)
    pytest.skip(missing)


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
