"""The API's listening socket queues a restart's reconnecting runners rather than
dropping their connections (see helmr.server.listen)."""

from __future__ import annotations

import select
import socket
import time

from aiohttp import web

from helmr.server import listen

CONNECTIONS = 600
"""Well past aiohttp's default backlog (128), within the kernel's default cap (4096)."""


def handshakes(port: int, count: int, seconds: float) -> int:
    """Opens ``count`` connections at once; how many completed their handshake
    within ``seconds`` (the kernel's, with nobody accepting them)."""
    pending = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            pending.append(sock)
        completed = 0
        deadline = time.monotonic() + seconds
        while pending and time.monotonic() < deadline:
            _, writable, _ = select.select([], pending, [], 0.1)
            for sock in writable:
                pending.remove(sock)
                completed += sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                sock.close()
        return completed
    finally:
        for sock in pending:
            sock.close()


async def test_a_burst_of_connections_waits_in_the_kernel_queue_for_a_busy_process() -> None:
    runner = web.AppRunner(web.Application())
    await runner.setup()
    try:
        await listen(runner, "127.0.0.1", 0)
        port = runner.addresses[0][1]
        # Called without awaiting: the event loop accepts nothing meanwhile, as
        # while a restarted control plane is busy.
        assert handshakes(port, CONNECTIONS, seconds=5) == CONNECTIONS
    finally:
        await runner.cleanup()
