"""The runner's HTTP client keeps TCP keepalive on every connection, so a long
poll to a control plane that vanished without closing it fails in seconds, not
at the end of its window (helmr.runner.http)."""

from __future__ import annotations

import asyncio
import socket

from helmr.runner import http
from helmr.runner.http import HttpClient


async def test_a_connection_is_probed_after_10_s_of_silence_and_fails_after_25() -> None:
    served = asyncio.Event()

    async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)  # the body: {}
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
            await reader.read()  # until the client closes it
        finally:
            writer.close()
            await writer.wait_closed()
            served.set()

    server = await asyncio.start_server(answer_ok, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = HttpClient(f"http://127.0.0.1:{port}")
    try:
        assert await client.post("/ping", b"{}", {}) == (200, b"{}")
        [(_, writer)] = client._idle  # the connection, kept for the next request
        sock = writer.get_extra_info("socket")
        options = (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        )
        assert options == (1, 10, 5, 3)
        assert http.KEEPALIVE_IDLE + http.KEEPALIVE_INTERVAL * http.KEEPALIVE_PROBES == 25
    finally:
        await client.close()
        await asyncio.wait_for(served.wait(), 5)
        server.close()
        await server.wait_closed()
