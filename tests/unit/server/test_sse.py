"""The event stream (server-sent events): cursors, live follow, end, client abort."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import ClientResponse

from tests.unit.api import (
    ADMIN,
    Api,
    bearer,
)


async def _next_event(response: ClientResponse) -> dict[str, Any]:
    """The next SSE message as {event, id, data}; comments (keepalives) are counted."""
    fields: dict[str, Any] = {"event": "message", "keepalives": 0}
    while True:
        line = (await response.content.readline()).decode().rstrip("\n")
        if line.startswith(":"):
            fields["keepalives"] += 1
        elif line:
            name, _, value = line.partition(": ")
            fields[name] = json.loads(value) if name == "data" else value
        elif "data" in fields:
            return fields


async def _until_end(response: ClientResponse) -> list[dict[str, Any]]:
    events = []
    while (event := await _next_event(response))["event"] != "end":
        events.append(event)
    assert event["data"] == {"status": "closed"}
    assert await response.content.read() == b""  # the server ended the response
    return events


async def _ended_session(api: Api) -> str:
    sid = await api.start()
    for n in range(4):
        await api.enqueue(sid, n)
    await api.call("POST", f"/v1/sessions/{sid}/cancel", json={})
    return sid


async def test_stream_of_an_ended_session_sends_everything_then_end(api: Api) -> None:
    sid = await _ended_session(api)
    page = await api.call("GET", f"/v1/sessions/{sid}/events?limit=1000")
    async with api.http.get(f"/v1/sessions/{sid}/events/stream", headers=bearer(ADMIN)) as r:
        assert r.status == 200
        assert r.content_type == "text/event-stream"
        events = await _until_end(r)
    assert [e["data"] for e in events] == page["records"]
    assert [e["id"] for e in events] == [str(rec["sequence"]) for rec in page["records"]]


async def test_stream_resumes_from_a_cursor(api: Api) -> None:
    sid = await _ended_session(api)
    last = (await api.call("GET", f"/v1/sessions/{sid}/events"))["next_after"]
    path = f"/v1/sessions/{sid}/events/stream"
    async with api.http.get(path + "?after=3", headers=bearer(ADMIN)) as r:
        assert [e["data"]["sequence"] for e in await _until_end(r)] == list(range(4, last + 1))
    # An EventSource reconnect: Last-Event-ID wins over the original `after`.
    headers = {**bearer(ADMIN), "Last-Event-ID": "5"}
    async with api.http.get(path + "?after=1", headers=headers) as r:
        assert [e["data"]["sequence"] for e in await _until_end(r)] == list(range(6, last + 1))
    async with api.http.get(f"{path}?after={last}", headers=bearer(ADMIN)) as r:
        assert await _until_end(r) == []


async def _keepalive(response: ClientResponse) -> None:
    line = await response.content.readline()
    assert line == b": keepalive\n"
    assert await response.content.readline() == b"\n"


async def test_stream_follows_a_live_session(api: Api) -> None:
    sid = await api.start()
    first = await api.enqueue(sid, "first")
    async with api.http.get(f"/v1/sessions/{sid}/events/stream", headers=bearer(ADMIN)) as r:
        event = await _next_event(r)
        assert (event["id"], event["data"]["turn_id"]) == ("1", first)
        # Nothing new: the server keeps the connection alive with comments.
        await _keepalive(r)
        second = await api.enqueue(sid, "second")
        event = await _next_event(r)
        assert (event["id"], event["data"]["turn_id"]) == ("2", second)
        await api.call("POST", f"/v1/sessions/{sid}/cancel", json={})
        tail = await _until_end(r)
    assert [e["data"]["kind"] for e in tail] == [
        "turn.cancelled",
        "turn.cancelled",
        "session.closed",
    ]


async def test_a_client_abort_stops_observation_only(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid, "work")
    before = await api.call("GET", f"/v1/sessions/{sid}/events")
    async with api.http.get(f"/v1/sessions/{sid}/events/stream", headers=bearer(ADMIN)) as r:
        await _next_event(r)
        r.close()  # the observer goes away mid-stream
    session = await api.call("GET", f"/v1/sessions/{sid}")
    assert (session["status"], session["queued_turns"]) == ("open", 1)
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}"))["status"] == "queued"
    assert await api.call("GET", f"/v1/sessions/{sid}/events") == before


@pytest.mark.timeout(60)  # without the shutdown hook the stream would never end
async def test_shutdown_ends_open_streams(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid)
    async with api.http.get(f"/v1/sessions/{sid}/events/stream", headers=bearer(ADMIN)) as r:
        await _next_event(r)
        await api.app.shutdown()  # what the runner's cleanup does first
        with contextlib.suppress(aiohttp.ClientPayloadError):  # cut, not ended
            rest = await r.content.read()
            assert b"event: end" not in rest
    # The session is untouched: only its observers were let go.
    assert (await api.call("GET", f"/v1/sessions/{sid}"))["status"] == "open"
