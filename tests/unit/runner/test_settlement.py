"""Settlement with a message handler still running, the actor SDK against the real
control plane (the ``api`` fixture: the app over a SQLite or PostgreSQL store).

spec/001: "Settlement rejects new sends with `turn_settling` and emits
rejections for accepted messages whose handlers never started."
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from helmr.client import Client
from helmr.protocol import EPOCH_HEADER
from helmr.runner import Message, Session
from helmr.runner.transport import Transport
from tests.unit.api import ADMIN, Api


@pytest.fixture
async def runner(api: Api) -> AsyncIterator[tuple[str, Session]]:
    """A Session with one Turn enqueued, and the actor side of its runner process."""
    sid = await api.start()
    await api.enqueue(sid, "work")
    headers = await api.runner(sid)
    token = headers["Authorization"].removeprefix("Bearer ")
    transport = Transport(
        api.runner_url, sid, lambda: token, int(headers[EPOCH_HEADER]), on_fenced=lambda: None
    )
    async with transport:
        yield sid, Session(transport)


async def _rejected(api: Api, sid: str, message_id: str) -> None:
    """Follows the timeline until ``message_id`` is rejected."""
    async with Client(api.url, ADMIN) as client:
        async for event in client.sessions.ref(sid).events.stream():
            if event.kind == "message.rejected" and event.data == {
                "messageId": message_id,
                "reason": "turn_settling",
            }:
                return


async def test_a_send_after_complete_is_refused_while_a_handler_still_runs(
    api: Api, runner: tuple[str, Session]
) -> None:
    sid, session = runner
    turn = await session.receive()
    assert turn is not None
    handling = asyncio.Event()
    release = asyncio.Event()

    async def handler(message: Message) -> None:
        handling.set()
        await release.wait()
        # Not awaited: the runner records it before the report that lets the outcome commit.
        turn.output.write(f"handled {message.data}")

    await turn.on_message(handler)
    send = f"/v1/sessions/{sid}/turns/{turn.id}/send"
    first = await api.call("POST", send, json={"data": "first"})
    await handling.wait()
    # Accepted while the handler runs: its handler never starts.
    waiting = await api.call("POST", send, json={"data": "second"})

    settling = asyncio.create_task(turn.complete("done"))
    # Settlement began (the server rejected the waiting message): a state, not a duration.
    await _rejected(api, sid, waiting["message"]["id"])
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{turn.id}"))["settling"]
    refused = await api.call("POST", send, json={"data": "third"}, status=409)
    assert refused["error"]["code"] == "turn_settling"
    refused = await api.call("POST", f"/v1/sessions/{sid}/send", json={"data": "4"}, status=409)
    assert refused["error"]["code"] == "turn_settling"
    assert not settling.done()  # the handler in progress is still running

    release.set()
    await settling
    assert turn.settled
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{turn.id}")
    assert (view["status"], view["result"]) == ("completed", "done")
    page = await api.call("GET", f"/v1/sessions/{sid}/events")
    seen = [(r["kind"], r["data"]) for r in page["records"] if r["kind"].startswith("message.")]
    ended = [
        (r["kind"], r["data"])
        for r in page["records"]
        if r["kind"] in ("turn.output", "turn.completed")
    ]
    first_id, waiting_id = first["message"]["id"], waiting["message"]["id"]
    assert seen == [
        ("message.admitted", {"messageId": first_id}),
        ("message.started", {"messageId": first_id}),
        ("message.admitted", {"messageId": waiting_id}),
        ("message.rejected", {"messageId": waiting_id, "reason": "turn_settling"}),
        ("message.delivered", {"messageId": first_id}),
    ]
    # The handler's output is recorded before the outcome its report let commit.
    assert ended == [
        ("turn.output", [{"type": "text", "text": "handled first"}]),
        ("turn.completed", {"hasResult": True, "hasResponse": False}),
    ]
