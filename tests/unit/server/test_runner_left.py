"""A runner that left its ``receive`` (its process ending) gets no Turn started for
it: the Turn enqueued then stays queued for a process that asks. Served as in
production, where a request's handler runs on when its client leaves (the test
client's server cancels it)."""

from __future__ import annotations

import asyncio

import aiohttp

from helmr.events import EventKind
from helmr.protocol import routes
from helmr.server import app_runner, listen
from tests.unit.api import Api


async def test_a_receive_its_runner_left_starts_no_turn(api: Api) -> None:
    sid = await api.start()
    headers = await api.runner(sid)
    watches = api.control._store._signals._watches
    served = app_runner(api.app)
    await served.setup()
    try:
        await listen(served, "127.0.0.1", 0)
        host, port = served.addresses[0][:2]
        async with aiohttp.ClientSession(f"http://{host}:{port}") as http, asyncio.timeout(10):
            receive = asyncio.create_task(
                http.post(routes.receive(sid), json={"timeout": 30}, headers=headers)
            )
            while sid not in watches:  # noqa: ASYNC110 (it waits, having looked)
                await asyncio.sleep(0.01)
            receive.cancel()  # the runner leaves, and its connection with it
            await asyncio.gather(receive, return_exceptions=True)
            assert served.server is not None
            while any(c.connected for c in served.server.connections):  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # the server has seen it leave
            turn = await api.enqueue(sid)
            while sid in watches:  # noqa: ASYNC110 (the enqueue woke the wait, which ended)
                await asyncio.sleep(0.01)
    finally:
        await served.cleanup()
    assert (await api.control.get_turn(sid, turn)).status == "queued"
    page = await api.control.list_events(sid)
    assert [e.kind for e in page.records if e.turn_id == turn] == [EventKind.TURN_QUEUED]
