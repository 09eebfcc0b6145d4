"""The async client against a live app on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from helmr.client import Client, SessionRef, Turn
from helmr.errors import (
    HelmrError,
    HoldNotConverged,
    NotFound,
    SessionHeld,
    SessionNotOpen,
    TurnNotActive,
    Unauthenticated,
)
from tests.unit.api import (
    ADMIN,
    NAMESPACE,
    Api,
)


@pytest.fixture
async def client(api: Api) -> AsyncIterator[Client]:
    async with Client(api.url, ADMIN) as client:
        yield client


async def _session(client: Client, workspace: str = "ws") -> SessionRef:
    session, _ = await client.actors.start("reviewer", namespace=NAMESPACE, workspace=workspace)
    return session


async def test_start_retrieve_and_enqueue(api: Api, client: Client) -> None:
    session, run = await client.actors.start(
        "reviewer", namespace=NAMESPACE, workspace="ws", key="k", idempotency_key="once"
    )
    assert run is None
    again, _ = await client.actors.start(
        "reviewer", namespace=NAMESPACE, workspace="ws", idempotency_key="once"
    )
    assert again.id == session.id
    state = await session.retrieve()
    assert (state.id, state.status, state.key, state.actor) == (session.id, "open", "k", "reviewer")

    turn = await session.enqueue({"issue": "APP-42"}, idempotency_key="linear:1")
    repeat = await session.enqueue({"issue": "other"}, idempotency_key="linear:1")
    assert repeat.id == turn.id
    assert turn.state is not None
    assert (turn.state.sequence, turn.state.input) == (1, {"issue": "APP-42"})
    assert (await session.turn(turn.id).retrieve()).status == "queued"


async def test_wait_times_out_then_sees_the_outcome(api: Api, client: Client) -> None:
    session = await _session(client)
    turn = await session.enqueue(None)
    waited = await turn.wait(timeout=0)
    assert (waited.timeout, waited.status) == (True, "queued")

    tid, headers = await api.run_turn(session.id)
    waiter = asyncio.create_task(turn.wait())  # no timeout: until terminal
    await api.call(
        "POST",
        f"/runner/v1/sessions/{session.id}/turns/{tid}/complete",
        headers=headers,
        json={"result": None},
    )
    done: Turn = await waiter
    assert (done.status, done.timeout, done.has_result, done.result) == (
        "completed",
        False,
        True,
        None,
    )
    assert done.terminal


async def test_send_and_exact_turn_send(api: Api, client: Client) -> None:
    session = await _session(client)
    sent = await session.send({"q": 1})
    assert (sent.kind, sent.message) == ("enqueued", None)
    with pytest.raises(TurnNotActive):
        await sent.turn.send({"too": "early"})
    tid, _ = await api.run_turn(session.id)
    assert tid == sent.turn.id
    messaged = await session.send({"type": "hint"})
    assert messaged.kind == "messaged"
    assert messaged.turn.id == tid
    receipt = await session.turn(tid).send({"type": "stop"})
    assert (receipt.turn_id, receipt.data, receipt.status) == (tid, {"type": "stop"}, "admitted")


async def test_interrupt_resume_cancel_close(api: Api, client: Client) -> None:
    session = await _session(client)
    queued = await session.enqueue(1)
    await session.enqueue(2)
    running, _ = await api.run_turn(session.id)
    stopped = await session.turn(running).interrupt()
    assert (stopped.turn_id, stopped.scope) == (queued.id, "turn")
    hold = await session.interrupt()
    assert hold == stopped  # an exact-Turn interrupt holds the whole Session
    with pytest.raises(SessionHeld):
        await session.send("held")
    with pytest.raises(HoldNotConverged):
        await session.resume(hold_id=hold.hold_id)
    epoch = (await api.control.get_session(session.id)).process_epoch
    await api.control.process_exited(session.id, epoch, 0)  # its process let go
    resumed = await session.resume(hold_id=hold.hold_id)
    assert resumed.hold is None
    cancelled = await session.cancel(idempotency_key="stop-review")
    assert cancelled.cancel_requested_at is not None
    with pytest.raises(SessionNotOpen):
        await session.enqueue(3)

    other = await _session(client, "ws-2")
    closed = await other.close()
    assert closed.status == "closed"


async def test_event_pages(client: Client) -> None:
    session = await _session(client)
    for n in range(3):
        await session.enqueue(n)
    page = await session.events.list(after=0, limit=2)
    assert [r.sequence for r in page.records] == [1, 2]
    assert (page.next_after, page.has_more, page.retained_after) == (2, True, 0)
    rest = await session.events.list(after=page.next_after)
    assert [r.kind for r in rest.records] == ["turn.queued"]
    assert rest.has_more is False


async def test_errors_become_helmr_errors(api: Api, client: Client) -> None:
    with pytest.raises(NotFound) as found:
        await client.sessions.ref("ses_nope").retrieve()
    assert found.value.details == {"session_id": "ses_nope"}
    async with Client(api.url, "wrong") as stranger:
        with pytest.raises(Unauthenticated):
            await stranger.sessions.ref("ses_nope").retrieve()
    async with Client(api.url + "/not-helmr", ADMIN) as lost:
        with pytest.raises(HelmrError):
            await lost.sessions.ref("x").retrieve()


async def _ended_session(client: Client, turns: int) -> SessionRef:
    session = await _session(client)
    for n in range(turns):
        await session.enqueue(n)
    await session.cancel()
    return session


async def test_stream_until_the_session_ends(client: Client) -> None:
    session = await _ended_session(client, 3)
    streamed = [r async for r in session.events.stream(after=2)]
    page = await session.events.list(after=2)
    assert streamed == page.records
    assert streamed[-1].kind == "session.closed"


class CuttingProxy:
    """Forwards the event stream but cuts each connection after ``keep`` records;
    the connections numbered in ``refuse`` (from 0) get the 503 of a control plane
    whose store is restarting instead."""

    def __init__(self, upstream: str, keep: int, refuse: frozenset[int] = frozenset()) -> None:
        self.upstream = upstream
        self.keep = keep
        self.refuse = refuse
        self.cursors: list[str] = []

    async def stream(self, request: web.Request) -> web.StreamResponse:
        self.cursors.append(request.query["after"])
        if len(self.cursors) - 1 in self.refuse:
            return web.json_response(
                {"error": {"code": "unavailable", "message": "the store is restarting"}},
                status=503,
                headers={"Retry-After": "1"},
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sent = 0
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                self.upstream + request.path_qs,
                headers={"Authorization": request.headers["Authorization"]},
            ) as upstream,
        ):
            async for line in upstream.content:
                await response.write(line)
                sent += line == b"\n"
                if sent == self.keep:
                    assert request.transport is not None
                    request.transport.close()  # a dropped link, mid-stream
                    return response
        await response.write_eof()
        return response


async def test_stream_resumes_from_the_last_consumed_record(api: Api, client: Client) -> None:
    session = await _ended_session(client, 4)
    proxy = CuttingProxy(api.url, keep=2)
    app = web.Application()
    app.router.add_get("/v1/sessions/{sid}/events/stream", proxy.stream)
    async with TestServer(app) as server, Client(str(server.make_url("")), ADMIN) as via_proxy:
        streamed = [r async for r in via_proxy.sessions.ref(session.id).events.stream()]
    everything = await session.events.list(limit=1000)
    assert streamed == everything.records  # none skipped, none repeated
    assert len(streamed) == 9
    assert proxy.cursors == ["0", "2", "4", "6", "8"]


async def test_stream_rides_through_a_control_plane_that_answers_503(
    api: Api, client: Client
) -> None:
    session = await _ended_session(client, 4)
    proxy = CuttingProxy(api.url, keep=4, refuse=frozenset({0, 2}))
    app = web.Application()
    app.router.add_get("/v1/sessions/{sid}/events/stream", proxy.stream)
    async with TestServer(app) as server, Client(str(server.make_url("")), ADMIN) as via_proxy:
        streamed = [r async for r in via_proxy.sessions.ref(session.id).events.stream()]
    everything = await session.events.list(limit=1000)
    assert streamed == everything.records
    # refused, from 0; refused again after 4 records, then resumed from the 4th
    assert proxy.cursors == ["0", "0", "4", "4", "8"]


async def test_a_closed_client_sends_nothing_and_says_so(api: Api) -> None:
    # A reference outliving its client reopened a connection pool nothing closed.
    async with Client(api.url, ADMIN) as client:
        session = await _session(client)
    with pytest.raises(RuntimeError, match="the Helmr client is closed"):
        await session.retrieve()
    with pytest.raises(RuntimeError, match="the Helmr client is closed"):
        await anext(aiter(session.events.stream(after=0)))
