"""The runner port's own HTTP/1.1 server (``helmr.server.runner_server``) as HTTP:
keep-alive and pipelining, what it refuses and how, its timeouts, and what a waiting
long poll keeps, each on both event loops (``conftest.py``). The runner API's behaviour
through it is the runner's tests' (``tests/unit/runner`` runs them against both
servers)."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httptools
import pytest

from helmr.events import EventKind
from helmr.protocol import routes
from helmr.server import RUNNER_SERVER
from helmr.server import runner_server as module
from helmr.server.runner_server import RunnerServer
from tests.unit.api import Api

Reply = tuple[int, dict[str, str], bytes]


@pytest.fixture
async def server(api: Api) -> AsyncIterator[RunnerServer]:
    server = api.app[RUNNER_SERVER]
    yield server
    await server.close()


@asynccontextmanager
async def connected(
    server: RunnerServer,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    port = await server.listen("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()


def request(
    path: str, body: bytes = b"{}", headers: dict[str, str] | None = None, method: str = "POST"
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: helmr", "Content-Type: application/json"]
    lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def reply(reader: asyncio.StreamReader) -> Reply:
    """The next reply on the connection (by Content-Length, or chunked)."""
    async with asyncio.timeout(10):  # bounds a hang only
        return await _reply(reader)


async def _reply(reader: asyncio.StreamReader) -> Reply:
    status_line = await reader.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    headers: dict[str, str] = {}
    while (line := await reader.readline()) != b"\r\n":
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while size := int(await reader.readline(), 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readexactly(2)
    else:
        body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split()[1]), headers, body


def error_code(body: bytes) -> str:
    code: str = json.loads(body)["error"]["code"]
    return code


async def closed(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(5):
        return await reader.read() == b""


async def test_requests_on_one_connection_are_answered_in_order_pipelined_or_not(
    api: Api, server: RunnerServer
) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    receive = request(routes.receive(sid), b'{"timeout": 0.01}', headers)
    stops = request(routes.stops(sid), b'{"turn_ids": ["turn_1"], "timeout": 0.01}', headers)
    async with connected(server) as (reader, writer):
        writer.write(receive)
        assert (await reply(reader))[0] == 408  # no Turn: soon
        writer.write(stops + receive + stops)  # sent before any answer
        answers = [await reply(reader) for _ in range(3)]
        assert [status for status, _, _ in answers] == [200, 408, 200]
        assert json.loads(answers[0][2]) == {"turn_ids": ["turn_1"]}  # not its own: to stop
    assert len(server.connections) <= 1  # one connection carried them all


async def test_a_chunked_body_is_read_and_a_connection_close_is_honoured(
    api: Api, server: RunnerServer
) -> None:
    sid = await api.start()
    headers = await api.runner(sid) | {"Connection": "close"}
    head = [f"POST {routes.receive(sid)} HTTP/1.1", "Transfer-Encoding: chunked"]
    head.append("Content-Type: application/json")
    head += [f"{name}: {value}" for name, value in headers.items()]
    body = b'{"timeout": 0.01}'
    chunked = b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
    async with connected(server) as (reader, writer):
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + chunked)
        status, answered, _ = await reply(reader)
        assert (status, answered["connection"]) == (408, "close")
        assert await closed(reader)


async def test_unknown_routes_and_methods_are_json_errors_counted_by_route(
    api: Api, server: RunnerServer
) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    async with connected(server) as (reader, writer):
        writer.write(request(f"/runner/v1/sessions/{sid}/nothing", headers=headers))
        status, _, body = await reply(reader)
        assert (status, error_code(body)) == (404, "not_found")
        writer.write(request(routes.receive(sid), b"", headers, method="GET"))
        status, answered, body = await reply(reader)
        assert (status, error_code(body), answered["allow"]) == (405, "method_not_allowed", "POST")
        writer.write(request("/v1/namespaces/team/sessions", headers=headers))  # the public API
        assert (await reply(reader))[0] == 404
    exposition = (await (await api.http.get("/metrics")).read()).decode()
    # As aiohttp counts them: by no route.
    assert 'method="POST",route="unmatched",status="404"} 2.0' in exposition
    assert 'method="GET",route="unmatched",status="405"} 1.0' in exposition


async def test_a_stranger_is_refused_as_by_aiohttp(api: Api, server: RunnerServer) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    async with connected(server) as (reader, writer):
        writer.write(request(routes.receive(sid), b'{"timeout": 0.01}'))  # no token
        assert (await reply(reader))[0] == 401
        stranger = headers | {"Authorization": "Bearer someone-else"}
        writer.write(request(routes.receive(sid), b'{"timeout": 0.01}', stranger))
        assert (await reply(reader))[0] == 403
        writer.write(request(routes.receive(sid), b'{"timeout": "soon"}', headers))
        status, _, body = await reply(reader)
        assert (status, error_code(body)) == (400, "invalid_input")
        assert json.loads(body)["error"]["details"]["errors"][0]["loc"] == ["body", "timeout"]


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"POST /runner/v1/adoption HTTP/1.1\r\nX-Big: " + b"x" * 20_000 + b"\r\n\r\n", 400),
        (b"POST /runner/v1/adoption HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n{", 413),
        (
            b"GET /runner/v1/adoption HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket"
            b"\r\n\r\n",
            400,
        ),
    ],
    ids=["not HTTP", "head too large", "body too large", "an upgrade"],
)
async def test_what_cannot_be_read_is_answered_and_the_connection_closed(
    server: RunnerServer, sent: bytes, status: int
) -> None:
    async with connected(server) as (reader, writer):
        writer.write(sent)
        answered, headers, body = await reply(reader)
        assert (answered, headers["connection"]) == (status, "close")
        assert "message" in json.loads(body)["error"]
        assert await closed(reader)


async def test_a_chunked_body_past_the_limit_is_refused(server: RunnerServer) -> None:
    server.max_body = 10
    head = b"POST /runner/v1/adoption HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with connected(server) as (reader, writer):
        writer.write(head + b'8\r\n{"a": 1,\r\n')
        writer.write(b'8\r\n "b": 2}\r\n0\r\n\r\n')
        assert (await reply(reader))[0] == 413
        assert await closed(reader)


async def test_idle_connections_and_requests_that_never_end_are_closed(
    server: RunnerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "KEEPALIVE", 0.1)
    monkeypatch.setattr(module, "REQUEST_SECONDS", 0.1)
    async with connected(server) as (reader, _):
        assert await closed(reader)  # idle from the start
    async with connected(server) as (reader, writer):
        writer.write(b"POST /runner/v1/adoption HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        assert await closed(reader)  # the rest of its body never came


async def test_a_receive_its_runner_left_starts_no_turn(api: Api, server: RunnerServer) -> None:
    """As on aiohttp (``test_runner_left.py``): the connection is read while its
    request waits, so the runner's leaving is seen, and the wait's wake-up starts no
    Turn for it."""
    sid = await api.start()
    headers = await api.runner(sid)
    watches = api.control._store._signals._watches
    async with connected(server) as (_, writer), asyncio.timeout(10):
        writer.write(request(routes.receive(sid), b'{"timeout": 30}', headers))
        while sid not in watches:  # noqa: ASYNC110 (it waits, having looked)
            await asyncio.sleep(0.01)
    while any(c.connected for c in server.connections):  # noqa: ASYNC110
        await asyncio.sleep(0.01)  # the server has seen it leave
    turn = await api.enqueue(sid)
    async with asyncio.timeout(10):
        while sid in watches:  # noqa: ASYNC110 (the enqueue woke the wait, which ended)
            await asyncio.sleep(0.01)
    assert (await api.control.get_turn(sid, turn)).status == "queued"
    page = await api.control.list_events(sid)
    assert [e.kind for e in page.records if e.turn_id == turn] == [EventKind.TURN_QUEUED]


async def test_a_waiting_receive_keeps_no_parser_headers_or_body(
    api: Api, server: RunnerServer
) -> None:
    """What 5,000 idle runners each keep (issue 31): neither the connection's parser
    nor the request's headers (the runner's token, a kilobyte) and body."""
    sessions = [await api.start(f"ws{n}") for n in range(10)]
    watches = api.control._store._signals._watches
    port = await server.listen("127.0.0.1", 0)
    before = _parsers()
    streams = []
    try:
        for sid in sessions:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            headers = await api.runner(sid)
            writer.write(request(routes.receive(sid), b'{"timeout": 60}', headers))
            streams.append((reader, writer))
        async with asyncio.timeout(10):
            while len(watches) < len(sessions):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert _parsers() - before < len(sessions)
        waiting = [o for o in gc.get_objects() if isinstance(o, module._Request)]
        assert len(waiting) == len(sessions)
        assert all(not r.headers and not r.body and not r.match_info for r in waiting)
    finally:
        for _, writer in streams:
            writer.close()


def _parsers() -> int:
    gc.collect()
    return sum(isinstance(o, httptools.HttpRequestParser) for o in gc.get_objects())


async def test_closing_the_server_ends_its_connections_and_waits(
    api: Api, server: RunnerServer
) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    async with connected(server) as (reader, writer):
        writer.write(request(routes.receive(sid), b'{"timeout": 60}', headers))
        watches = api.control._store._signals._watches
        async with asyncio.timeout(10):
            while sid not in watches:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await server.close()
        assert await closed(reader)
        async with asyncio.timeout(10):
            while sid in watches:  # noqa: ASYNC110 (its wait was cancelled)
                await asyncio.sleep(0.01)
