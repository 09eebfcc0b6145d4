"""The runner's tests run against both servers of the runner API: aiohttp's, beside
the public API, and the runner port's own (``helmr.server.runner_server``)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[False, True], ids=["beside the API", "own port"])
def runner_port(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)
