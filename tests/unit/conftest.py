"""What every unit test shares: a 30 s timeout, the helm and promtool gates, the
store's two backends, and the two compositions most tests start from (``h``: a
store and the Control over it; ``api``: that plus the REST app served on loopback).

``store_location`` is where a test's store lives, once per backend: a SQLite
file, and a fresh database on a PostgreSQL server this session starts from
Debian's packages (``tests.postgres``); a test that opens a store takes it
and so runs on both.

A module changes how ``h`` is built by overriding ``clock``,
``control_config`` or ``retention`` (``api`` takes ``retention`` too).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helmr.control import ControlConfig
from helmr.server import RUNNER_SERVER, StaticRunnerTokens
from tests import postgres
from tests.compose import Clock, open_plane, static_app
from tests.unit.api import GRANTS, Api, RecordingMirror
from tests.unit.control.harness import Harness
from tests.unit.helm import BUILT_DIR, find_helm, find_promtool

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


# The built tools a marker needs: the environment variable that makes a missing
# one fail its tests instead of skipping them, and how to find it.
_TOOLS = {
    "helm": ("HELMR_REQUIRE_HELM", find_helm),
    "promtool": ("HELMR_REQUIRE_PROMTOOL", find_promtool),
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    missing = [
        (marker, required_by)
        for marker, (required_by, find) in _TOOLS.items()
        if item.get_closest_marker(marker) is not None and find() is None
    ]
    for marker, required_by in missing:
        # `make test` (and so CI) sets these: there, a skip would let a broken chart through.
        if os.environ.get(required_by):
            pytest.fail(f"{marker} is neither on PATH nor in {BUILT_DIR}: run `make build`")
    if missing:
        names = " and ".join(marker for marker, _ in missing)
        pytest.skip(f"{names}: neither on PATH nor in {BUILT_DIR}; build with `make build`")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.PostgresServer]:
    binaries = postgres.find_binaries()
    if binaries is None:
        missing = f"PostgreSQL is not installed (no {postgres.DEBIAN_BINARIES}/*/bin/initdb)"
        # `make test` (and so CI) sets this: there, a skip would hide the backend untested.
        if os.environ.get("HELMR_REQUIRE_POSTGRES"):
            pytest.fail(missing)
        pytest.skip(missing)
    server = postgres.start(binaries)
    try:
        server.prepare_template()
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    """Where the test's store lives: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield tmp_path / "helmr.db"
        return
    server: postgres.PostgresServer = request.getfixturevalue("postgres_server")
    with server.database() as url:
        yield url


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
    store_location: str | Path,
    clock: Clock,
    control_config: ControlConfig,
    retention: timedelta | None,
) -> AsyncIterator[Harness]:
    async with Harness.open(
        store_location, clock=clock, config=control_config, retention=retention
    ) as h:
        yield h


@pytest.fixture
def runner_port() -> bool:
    """Whether the ``api`` fixture serves its runner API on a port of its own
    (``helmr.server.runner_server``, as the chart does; ``Api.runner_url``), not beside
    the public API. The runner's tests (``tests/unit/runner``) run both ways."""
    return False


@pytest.fixture
async def api(
    store_location: str | Path, retention: timedelta | None, runner_port: bool
) -> AsyncIterator[Api]:
    async with open_plane(store_location, retention=retention) as plane:
        tokens = StaticRunnerTokens()
        mirror = RecordingMirror()
        app = static_app(
            plane.control, GRANTS, tokens, mirror=mirror, workspaces=mirror, keepalive=0.05
        )
        async with TestClient(TestServer(app)) as http:
            api = Api(plane.control, app, http, tokens, mirror)
            if not runner_port:
                yield api
                return
            own = app[RUNNER_SERVER]
            api.own_runner_url = f"http://127.0.0.1:{await own.listen('127.0.0.1', 0)}"
            try:
                yield api
            finally:
                await own.close()
