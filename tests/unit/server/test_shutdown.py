"""A stopping API server does not wait for the runners' long polls: it ends them,
and the runner asks again (every runner call is safe to repeat). Before, aiohttp
waited up to 60 s for each, past a pod's grace period, and the control plane was
killed instead of stopping."""

from __future__ import annotations

import asyncio

import aiohttp

from helmr.protocol import routes
from helmr.server import app_runner, listen
from tests.unit.api import Api


async def test_a_stopping_server_ends_a_held_receive_at_once(api: Api) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    watches = api.control._store._signals._watches
    served = app_runner(api.app)
    await served.setup()
    stopped = False
    try:
        await listen(served, "127.0.0.1", 0)
        host, port = served.addresses[0][:2]
        async with aiohttp.ClientSession(f"http://{host}:{port}") as http:
            receive = asyncio.create_task(
                http.post(routes.receive(sid), json={"timeout": 110}, headers=headers)
            )
            async with asyncio.timeout(10):
                while sid not in watches:  # noqa: ASYNC110 (it waits, having looked)
                    await asyncio.sleep(0.01)
                # Well within the receive's wait and aiohttp's own 60 s default.
                await served.cleanup()
                stopped = True
                ended = await asyncio.gather(receive, return_exceptions=True)
    finally:
        if not stopped:
            await served.cleanup()
    assert isinstance(ended[0], aiohttp.ClientError), ended
