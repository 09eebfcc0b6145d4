"""How the API is served: a connection queue deep enough for every runner at once,
and a stop that does not wait for the long polls.

After a control-plane restart every runner reconnects at once: a connection per
Session while the restarted process is busy starting. aiohttp listens with a backlog
of 128; past it the kernel drops each new connection's SYN, and the client waits for
TCP to send it again, seconds more each time (docs/sizing.md has what that cost at
scale). The kernel caps the backlog at ``net.core.somaxconn`` (4096 by default
since Linux 5.4, per network namespace: per pod).

Stopping, aiohttp waits for the requests in flight (60 s by default) before it
cancels them. Most are runners' long polls, which wait up to two minutes
(``helmr.runner.session.RECEIVE_WINDOW``), so a control plane with runners
connected took a minute to stop, past a pod's grace period (30 s in the chart):
it was killed instead, on every rollout. A runner call is safe to repeat and a
runner repeats one whose connection closed, so none needs waiting for.
"""

from __future__ import annotations

from aiohttp import web

LISTEN_BACKLOG = 4096
"""Connections the kernel holds for the process to accept."""

SHUTDOWN_SECONDS = 0.5
"""How long a stopping server lets the requests in flight run before it cancels them."""


def app_runner(app: web.Application) -> web.AppRunner:
    """``app``'s runner: no access log (the API's middleware logs), and a short stop."""
    return web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)


async def listen(runner: web.AppRunner, host: str, port: int) -> None:
    """Serves ``runner``'s application on ``host``:``port`` (0: a free one)."""
    await web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG).start()
