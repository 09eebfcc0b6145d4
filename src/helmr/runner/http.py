"""The runner's HTTP/1.1 client: POST a body to the control plane, read the reply.

The runner calls one server (the runner API) with a few kinds of small JSON
POSTs; this speaks just that over asyncio streams: keep-alive connections to
that one host (``http``, or ``https`` when the URL says so), replies framed by
``Content-Length``, chunked, or by the end of the connection. aiohttp's client
did the same at the cost of its imports in every runner's cold start
(``tests/unit/runner/test_imports.py``), and ``http.client`` would block the event
loop.

A failure is a ``ConnectionError`` (a connection refused, or one that closed or
answered something that is not HTTP) or another ``OSError``; the connection it
happened on, or was cancelled on (a timeout), is closed, never reused.

Every connection has TCP keepalive on (:data:`KEEPALIVE_IDLE` and the rest): a
long poll on a control plane whose node went away without closing it (nothing
answers, nothing is sent) fails within 25 s, however long the poll may wait.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]

Heard = Callable[[int], None]
"""Told a reply's status once its head has come."""

KEEPALIVE_IDLE = 10
"""Seconds a connection is silent before the kernel probes the server."""
KEEPALIVE_INTERVAL = 5
KEEPALIVE_PROBES = 3
"""Probes unanswered, ``KEEPALIVE_INTERVAL`` s apart, before the connection fails."""


class HttpClient:
    """Connections to the server of ``url`` (its path is the prefix of every request)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._https = parts.scheme == "https"
        self._authority = parts.netloc
        self._prefix = parts.path.rstrip("/")
        self._idle: list[_Streams] = []

    async def post(
        self,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        heard: Heard | None = None,
    ) -> tuple[int, bytes]:
        """The reply's status and body (bound the wait with ``asyncio.timeout``);
        ``heard`` is told the status as soon as the reply's head has come, before
        its body (a held reply's comes later)."""
        head = self._head(path, len(body), headers)
        while self._idle:
            streams = self._idle.pop()
            if streams[0].at_eof():
                streams[1].close()
                continue
            try:
                return await self._exchange(streams, head, body, heard)
            except ConnectionError:
                # The server closed this idle connection before it saw the
                # request (its keep-alive timeout): a fresh one will do.
                continue
        return await self._exchange(await self._connect(), head, body, heard)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def _connect(self) -> _Streams:
        ssl = None
        if self._https:
            import ssl as tls  # only for an https URL: it costs a plain runner nothing

            ssl = tls.create_default_context()
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=ssl)
        _keep_alive(writer.get_extra_info("socket"))
        return reader, writer

    def _head(self, path: str, length: int, headers: Mapping[str, str]) -> bytes:
        lines = [
            f"POST {self._prefix}{path} HTTP/1.1",
            f"Host: {self._authority}",
            "Content-Type: application/json",
            f"Content-Length: {length}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _exchange(
        self, streams: _Streams, head: bytes, body: bytes, heard: Heard | None
    ) -> tuple[int, bytes]:
        reader, writer = streams
        try:
            writer.write(head + body)
            await writer.drain()
            status, reply, reusable = await _read_reply(reader, heard)
        except BaseException:
            writer.close()  # half a reply (or a cancelled wait) leaves it unusable
            raise
        if reusable:
            self._idle.append(streams)
        else:
            writer.close()
        return status, reply


def _keep_alive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)


async def _read_reply(reader: asyncio.StreamReader, heard: Heard | None) -> tuple[int, bytes, bool]:
    """Status, body, and whether the connection may carry another request."""
    try:
        status_line = await reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        version, _, rest = status_line.decode("latin-1").partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise ConnectionError(f"not an HTTP reply: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        reusable = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if heard is not None:
            heard(int(rest[:3]))
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = await _read_chunks(reader)
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body, reusable = await reader.read(), False
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
        raise ConnectionError(f"the reply broke off or is not HTTP: {e}") from e
    return int(rest[:3]), body, reusable


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the chunk's CRLF
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass  # trailers: nothing the runner reads
    return b"".join(parts)
