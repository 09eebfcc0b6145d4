"""Where the API listens: with a connection queue deep enough for every runner at once.

After a control-plane restart every runner reconnects within a second or two: with
5,000 Sessions, 5,000 connections while the restarted process is busy starting. aiohttp
listens with a backlog of 128; past it the kernel drops each new connection's SYN, and
the client waits for TCP to send it again (1 s, then 2 s more, 4 s more...). Measured
at 5,000 Sessions on kwok: the restarted process listened 3 s after the SIGKILL, and
the first client's enqueue reached it 8 s later (the host counted 7,188 listen
overflows). The kernel caps the backlog at ``net.core.somaxconn`` (4096 by default
since Linux 5.4, per network namespace: per pod).
"""

from __future__ import annotations

from aiohttp import web

LISTEN_BACKLOG = 4096
"""Connections the kernel holds for the process to accept."""


async def listen(runner: web.AppRunner, host: str, port: int) -> None:
    """Serves ``runner``'s application on ``host``:``port`` (0: a free one)."""
    await web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG).start()
