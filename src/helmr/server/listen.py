"""Where the API listens: with a connection queue deep enough for every runner at once.

After a control-plane restart every runner reconnects at once: a connection per
Session while the restarted process is busy starting. aiohttp listens with a backlog
of 128; past it the kernel drops each new connection's SYN, and the client waits for
TCP to send it again, seconds more each time (docs/sizing.md has what that cost at
scale). The kernel caps the backlog at ``net.core.somaxconn`` (4096 by default
since Linux 5.4, per network namespace: per pod).
"""

from __future__ import annotations

from aiohttp import web

LISTEN_BACKLOG = 4096
"""Connections the kernel holds for the process to accept."""


async def listen(runner: web.AppRunner, host: str, port: int) -> None:
    """Serves ``runner``'s application on ``host``:``port`` (0: a free one)."""
    await web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG).start()
