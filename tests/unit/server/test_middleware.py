"""The app's one middleware: every request's log context, its failures answered as JSON
and its count by the status it was answered (``helmr.server.app``)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from helmr import logs
from helmr.protocol import EPOCH_HEADER
from tests.compose import static_app
from tests.unit.api import GRANTS, Api


async def _bug(request: web.Request) -> web.StreamResponse:
    raise RuntimeError("a bug")


async def _moved(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/healthz")


async def _cancelled(request: web.Request) -> web.StreamResponse:
    raise asyncio.CancelledError  # as when its task is cancelled mid-request


@pytest.fixture
async def http(api: Api) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    """The API's app, with routes that fail in the ways no Helmr route should."""
    app = static_app(api.control, GRANTS)
    app.router.add_post("/bug/{session_id}/{turn_id}", _bug)
    app.router.add_get("/moved", _moved)
    app.router.add_get("/cancelled", _cancelled)
    async with TestClient(TestServer(app)) as client:
        yield client


class _Lines(logging.Handler):
    """Each line as the JSON formatter writes it, formatted where it is logged (so in
    the request's log context)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(logs.JsonFormatter().format(record)))


@contextmanager
def _logged(name: str) -> Iterator[list[dict[str, object]]]:
    lines = _Lines()
    logger = logging.getLogger(name)
    logger.addHandler(lines)
    try:
        yield lines.lines
    finally:
        logger.removeHandler(lines)


async def _counted(client: TestClient[web.Request, web.Application]) -> str:
    async with client.get("/metrics") as response:
        return await response.text()


async def test_a_bug_is_a_json_500_logged_about_its_request_and_counted(
    http: TestClient[web.Request, web.Application],
) -> None:
    with _logged("helmr.server.errors") as lines:
        async with http.post("/bug/ses_1/turn_2", headers={EPOCH_HEADER: "3"}) as response:
            assert response.status == 500
            assert (await response.json())["error"]["code"] == "internal"
    [line] = lines
    assert (line["level"], line["session"], line["turn"], line["epoch"]) == (
        "error",
        "ses_1",
        "turn_2",
        3,
    )
    assert "RuntimeError: a bug" in str(line["exception"])
    counted = await _counted(http)
    assert (
        'helmr_api_requests_total{method="POST",route="/bug/{session_id}/{turn_id}",'
        'status="500"} 1.0'
    ) in counted


async def test_an_unknown_route_is_a_json_404_counted_unmatched(
    http: TestClient[web.Request, web.Application],
) -> None:
    async with http.get("/nothing-here") as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "not_found"
    async with http.delete("/healthz") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "GET"
    counted = await _counted(http)
    assert 'helmr_api_requests_total{method="GET",route="unmatched",status="404"} 1.0' in counted
    assert 'helmr_api_requests_total{method="DELETE",route="unmatched",status="405"} 1.0' in (
        counted
    )


async def test_a_redirect_is_sent_as_it_is_and_counted(
    http: TestClient[web.Request, web.Application],
) -> None:
    async with http.get("/moved", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == "/healthz"
    counted = await _counted(http)
    assert 'helmr_api_requests_total{method="GET",route="/moved",status="302"} 1.0' in counted


async def test_a_cancelled_handler_is_counted_as_its_client_gone(
    http: TestClient[web.Request, web.Application],
) -> None:
    with pytest.raises(aiohttp.ServerDisconnectedError):
        async with http.get("/cancelled"):
            pass
    counted = await _counted(http)
    assert 'helmr_api_requests_total{method="GET",route="/cancelled",status="499"} 1.0' in counted
