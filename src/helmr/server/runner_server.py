"""The runner port's own HTTP/1.1 server: the runner API, at a fraction of aiohttp's
memory per waiting long poll.

Every Session's runner keeps a ``receive`` (or a held settlement) waiting for its next
Turn, so at 5,000 Sessions the waiting requests are most of what the control plane
holds beyond its store. aiohttp keeps about 14 KiB for each (its request and
connection, the parsed message, the payload stream and writer, two tasks);
``benchmarks/bench_long_poll_memory.py`` measures this server's against it. Here a
connection is a slotted protocol around its parser (httptools: llhttp, Node.js's
parser, in C), and a waiting request is its line and headers, its handler's frames and
the one task that runs them.

It serves the runner API's routes through the same :class:`~helmr.server.routing.Endpoint`
aiohttp serves them by: the same guard, inputs, handlers and error bodies, counted in
the same request metrics. It speaks HTTP/1.1 with keep-alive (HTTP/1.0 without);
bodies come by ``Content-Length`` or chunked; requests on a connection are answered
one at a time, in order; replies go by ``Content-Length``, a held reply's body (runner
protocol 5) as one chunk. It refuses, each with a JSON error body and the connection
closed: a request that does not parse or asks for an upgrade (400), a head over
``MAX_HEAD`` bytes (400), a body over the API's limit (413). An unknown path is 404
and a known one asked with another method 405, as aiohttp answers them. A connection
idle for ``KEEPALIVE`` seconds is closed, as aiohttp closes them, and so is one whose
request has not come whole ``REQUEST_SECONDS`` after it began.

A request keeps being read while its handler waits, so a runner that leaves is seen
at once (``Exchange.connected``: a long poll woken for it starts no Turn); more than
``MAX_QUEUED`` requests sent ahead of their answers pause the reading until they are
answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
from collections.abc import Iterable
from http import HTTPStatus
from typing import cast
from urllib.parse import parse_qsl, unquote

import httptools
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from helmr.errors import HelmrError, InvalidInput
from helmr.server.errors import (
    CLIENT_LEFT,
    failure_of,
    method_not_allowed,
    no_route,
    reply_headers,
    too_large,
)
from helmr.server.listen import LISTEN_BACKLOG
from helmr.server.log_context import bind_request
from helmr.server.metrics import UNMATCHED, Metrics
from helmr.server.routing import Endpoint, Guard, Operation, endpoint

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
"""Bytes a request's line and headers may take (a runner's: under 2 KiB)."""
MAX_QUEUED = 4
"""Requests read ahead of the one being answered before reading pauses."""
KEEPALIVE = 75.0
"""Seconds an idle connection is kept (aiohttp's ``keepalive_timeout``)."""
REQUEST_SECONDS = 60.0
"""Seconds a request may take to come whole once it began."""


class RunnerServer:
    """Serves ``ops`` (the runner API's) on the ports :meth:`listen` opens."""

    def __init__(
        self, ops: Iterable[Operation], guard: Guard, metrics: Metrics, *, max_body: int
    ) -> None:
        self._routes = _Routes(endpoint(op, guard) for op in ops)
        self._metrics = metrics
        self.max_body = max_body
        self._servers: list[asyncio.Server] = []
        self.connections: set[_Connection] = set()

    async def listen(self, host: str, port: int) -> int:
        """Serves on ``host``:``port`` (0: a free one); returns the port."""
        server = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self), host, port, backlog=LISTEN_BACKLOG, reuse_address=True
        )
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stops listening and closes every connection: the requests waiting on them
        are cancelled (a runner repeats a call whose connection closed, as after a
        restart; ``helmr.server.listen`` says why none is waited for)."""
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    def read_request(
        self, connection: _Connection, method: str, url: bytes, headers: CIMultiDict[str]
    ) -> _Request:
        """The request read, matched to its route (an unmatched one answers the error)."""
        parsed = httptools.parse_url(url)
        raw_path = parsed.path.decode("latin-1")
        path, query = unquote(raw_path), (parsed.query or b"").decode("latin-1")
        try:
            found, match_info = self._routes.find(method, raw_path)
        except HelmrError as refusal:
            return _Request(connection, None, method, path, {}, query, headers, refusal)
        return _Request(connection, found, method, path, match_info, query, headers, None)

    async def answer(self, request: _Request) -> None:
        """Answers ``request``, in a task of its own (its log context a copy)."""
        started = time.perf_counter()
        served = request.endpoint
        route = UNMATCHED if served is None else served.operation.spec.path
        bind_request(request)
        status = CLIENT_LEFT  # unless answered: its client left, or it was cancelled
        try:
            try:
                if request.refusal is not None:
                    raise request.refusal
                assert served is not None
                assert served.answer is not None
                exchange = request if served.operation.wants_exchange else None
                call = await served.prepare(request, exchange)
                request.release()  # read: a waiting long poll keeps none of it
                answer = served.answer(await call)
            except Exception as error:
                failure = failure_of(request, error)
                if failure is None or request.held:
                    # Its client left, or its reply is half sent: nothing can be said.
                    request.connection.drop()
                    return
                status = failure.status
                request.connection.reply(request, failure.status, _error_body(failure), failure)
                return
            status = 200
            request.connection.reply(request, status, answer)
        finally:
            self._metrics.observe_route(
                request.method, route, status, time.perf_counter() - started
            )
            request.connection.served()


class _Routes:
    """Each route's pattern (``{name}``: a path segment, as aiohttp matches it)."""

    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self._routes: dict[str, tuple[re.Pattern[str], dict[str, Endpoint]]] = {}
        for served in endpoints:
            spec = served.operation.spec
            if served.operation.wants_request or served.answer is None:
                raise TypeError(f"{spec.path}: a handler that writes its own reply is aiohttp's")
            _, by_method = self._routes.setdefault(spec.path, (_pattern(spec.path), {}))
            by_method[spec.method] = served

    def find(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]]:
        """The endpoint of ``method`` on the (still percent-encoded) ``path``, and its
        parameters decoded; NotFound or MethodNotAllowed."""
        for pattern, by_method in self._routes.values():
            match = pattern.fullmatch(path)
            if match is None:
                continue
            found = by_method.get(method)
            if found is None:
                raise method_not_allowed(method, by_method)
            return found, {name: unquote(value) for name, value in match.groupdict().items()}
        raise no_route()


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", template)
    # re.split alternates: literal text, a name, literal text, ...
    return re.compile(
        "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^{{}}/]+)"
            for i, part in enumerate(parts)
        )
    )


_NO_HEADERS: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())
_NO_HEADERS_YET: CIMultiDict[str] = CIMultiDict()
"""A connection's between requests (never added to: each request makes its own)."""


def _error_body(error: HelmrError) -> bytes:
    return json.dumps(error.to_json()).encode()


def _upgrade_refused() -> InvalidInput:
    return InvalidInput("this server does not upgrade connections")


def _whole(status: int, body: bytes, headers: dict[str, str], *, close: bool) -> bytes:
    """A JSON reply whose body is known: its head and its body."""
    return _head(status, headers | {"Content-Length": str(len(body))}, close=close) + body


def _head(status: int, headers: dict[str, str], *, close: bool) -> bytes:
    """A JSON reply's status line and headers, ``Connection: close`` if ``close``."""
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "Content-Type: application/json; charset=utf-8",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Request:
    """A request read whole: an :class:`~helmr.server.exchange.Incoming` for routing
    and an :class:`~helmr.server.exchange.Exchange` for its handler."""

    __slots__ = (
        "_query",
        "body",
        "connection",
        "endpoint",
        "headers",
        "held",
        "keep_alive",
        "match_info",
        "method",
        "path",
        "refusal",
    )

    def __init__(
        self,
        connection: _Connection,
        served: Endpoint | None,
        method: str,
        path: str,
        match_info: dict[str, str],
        query: str,
        headers: CIMultiDict[str],
        refusal: HelmrError | None,
    ) -> None:
        self.connection = connection
        self.endpoint = served
        self.method = method
        self.path = path
        self.match_info = match_info
        self._query = query
        self.headers = CIMultiDictProxy(headers)
        self.refusal = refusal
        self.body = b""
        self.keep_alive = True
        self.held = False

    def release(self) -> None:
        """Drops what its handler has read (its headers hold the runner's token, about a
        kilobyte): only the line is kept, for the log of a failure."""
        self.headers, self.match_info, self.body = _NO_HEADERS, {}, b""

    @property
    def query(self) -> MultiDictProxy[str]:
        return MultiDictProxy(MultiDict(parse_qsl(self._query, keep_blank_values=True)))

    @property
    def content_type(self) -> str:
        # aiohttp's default for a body of no declared type.
        declared = self.headers.get("Content-Type") or "application/octet-stream"
        return declared.partition(";")[0].strip().lower()

    async def read(self) -> bytes:
        return self.body

    @property
    def connected(self) -> bool:
        return self.connection.connected

    async def hold(self) -> None:
        self.connection.hold(self)
        self.held = True


class _Connection(asyncio.Protocol):
    """One client's connection: its requests parsed as they come, answered in order."""

    __slots__ = (
        "_body",
        "_body_size",
        "_head_size",
        "_headers",
        "_in_message",
        "_parser",
        "_paused",
        "_queued",
        "_server",
        "_serving",
        "_timer",
        "_url",
        "transport",
    )

    def __init__(self, server: RunnerServer) -> None:
        self._server = server
        self.transport: asyncio.Transport | None = None
        # Made as a request begins to come, dropped between requests: a connection
        # whose request waits holds no parser (about 0.9 KiB each).
        self._parser: httptools.HttpRequestParser | None = None
        self._in_message = False
        self._url = b""
        # A request's headers, made as it begins: a waiting connection holds none.
        self._headers: CIMultiDict[str] = _NO_HEADERS_YET
        self._head_size = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self._queued: list[_Request] = []  # rarely more than none: not a deque's 0.7 KiB
        self._serving: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False

    @property
    def connected(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    # asyncio's side ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream's transport (uvloop's is no asyncio.Transport subclass).
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)  # a peer gone silent
        self._server.connections.add(self)
        self._arm(KEEPALIVE)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._server.connections.discard(self)
        self._disarm()
        self._queued.clear()
        self._parser = None

    def data_received(self, data: bytes) -> None:
        if self._parser is None:
            self._parser = httptools.HttpRequestParser(self)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(_upgrade_refused())  # its head refused it already
        except httptools.HttpParserError as e:
            self._refuse(InvalidInput(f"the request is not HTTP/1.1: {e}"))
        if not self._in_message:
            self._parser = None
        if len(self._queued) > MAX_QUEUED and self.transport is not None and not self._paused:
            self.transport.pause_reading()
            self._paused = True

    # The parser's side (httptools' callbacks) --------------------------------------

    def on_message_begin(self) -> None:
        # Its line and body start empty: the last message's went with it.
        self._in_message = True
        self._headers, self._head_size, self._body_size = CIMultiDict(), 0, 0
        self._arm(REQUEST_SECONDS)

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.add(name.decode("latin-1"), value.decode("latin-1"))
        self._count_head(len(name) + len(value))

    def on_headers_complete(self) -> None:
        if self._parser is not None and self._parser.should_upgrade():
            self._refuse(_upgrade_refused())
            return
        length = self._headers.get("Content-Length", "")
        expects = self._headers.get("Expect", "").lower() == "100-continue"
        if length.isdigit() and int(length) > self._server.max_body:
            self._refuse(too_large(f"{length} bytes, at most {self._server.max_body}"))
        elif expects and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._body_size += len(body)
        if self._body_size > self._server.max_body:
            self._refuse(too_large(f"more than {self._server.max_body} bytes"))

    def on_message_complete(self) -> None:
        self._in_message = False
        parser = self._parser
        if parser is None or self.transport is None or self.transport.is_closing():
            return
        self._disarm()
        method = parser.get_method().decode("latin-1")
        request = self._server.read_request(self, method, self._url, self._headers)
        request.body = b"".join(self._body)
        request.keep_alive = parser.should_keep_alive()
        self._url, self._headers, self._body = b"", _NO_HEADERS_YET, []
        self._queued.append(request)
        self._next()

    # Answers ----------------------------------------------------------------------

    def reply(
        self, request: _Request, status: int, body: bytes, error: HelmrError | None = None
    ) -> None:
        """Writes ``request``'s answer (its body only, if its head was sent)."""
        if self.transport is None:
            return
        if request.held:
            self.transport.write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body))
        else:
            headers = {} if error is None else reply_headers(error)
            self.transport.write(_whole(status, body, headers, close=not request.keep_alive))
        if not request.keep_alive:
            self.transport.close()

    def hold(self, request: _Request) -> None:
        """Sends ``request``'s head: 200, JSON, chunked (its body comes with :meth:`reply`)."""
        if self.transport is None:
            raise ConnectionResetError("the runner left before its held reply's head")
        chunked = {"Transfer-Encoding": "chunked"}
        self.transport.write(_head(200, chunked, close=not request.keep_alive))

    def drop(self) -> None:
        """Closes the connection (what it was answering can no longer be)."""
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        """Closes the connection and cancels what it was answering (the server stops)."""
        if self._serving is not None:
            self._serving.cancel()
        self.drop()

    def _refuse(self, error: HelmrError) -> None:
        """Answers a request that cannot be read with ``error`` (unless another is being
        answered), and closes: what follows it on the connection cannot be told apart."""
        if self.transport is None or self.transport.is_closing():
            return
        if self._serving is None:
            answer = _whole(error.status, _error_body(error), reply_headers(error), close=True)
            self.transport.write(answer)
        log.info("refused a request on the runner port: %s", error.message)
        self.transport.close()

    def _next(self) -> None:
        """Answers the first queued request, unless one is being answered."""
        if self._serving is not None or not self._queued:
            return
        request = self._queued.pop(0)
        self._serving = asyncio.get_running_loop().create_task(self._server.answer(request))

    def served(self) -> None:
        """The request being answered was (its task's last step)."""
        self._serving = None
        if self.transport is None or self.transport.is_closing():
            return
        if self._paused and len(self._queued) <= MAX_QUEUED:
            self.transport.resume_reading()
            self._paused = False
        if self._queued:
            self._next()
        else:
            self._arm(KEEPALIVE)

    def _count_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEAD:
            self._refuse(InvalidInput(f"the request's head is larger than {MAX_HEAD} bytes"))

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        """Idle for ``KEEPALIVE`` seconds, or a request not whole in ``REQUEST_SECONDS``."""
        self._timer = None
        if self._serving is None and self.transport is not None:
            self.transport.close()
