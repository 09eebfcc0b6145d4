"""``POST /runner/v1/sessions/{id}/stops``, the stop channel, over HTTP against the
real app: it holds the runner's request until a stop of one of its Turns is
accepted (issue 9 item 5)."""

from __future__ import annotations

import asyncio

from helmr.protocol import EPOCH_HEADER
from tests.unit.api import Api


async def test_the_stops_poll_answers_the_interrupted_turn(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid, "work")
    turn_id, headers = await api.run_turn(sid)
    stops = f"/runner/v1/sessions/{sid}/stops"

    quiet = await api.call(
        "POST", stops, headers=headers, json={"turn_ids": [turn_id], "timeout": 0.05}
    )
    assert quiet == {"turn_ids": []}

    poll = asyncio.create_task(
        api.call("POST", stops, headers=headers, json={"turn_ids": [turn_id], "timeout": 10})
    )
    await asyncio.sleep(0.05)
    assert not poll.done()
    await api.call("POST", f"/v1/sessions/{sid}/turns/{turn_id}/interrupt")

    assert await asyncio.wait_for(poll, 2) == {"turn_ids": [turn_id]}


async def test_the_stops_poll_is_fenced_and_validated(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid, "work")
    turn_id, headers = await api.run_turn(sid)
    stops = f"/runner/v1/sessions/{sid}/stops"

    stale = {**headers, EPOCH_HEADER: str(int(headers[EPOCH_HEADER]) - 1)}
    refused = await api.call(
        "POST", stops, headers=stale, json={"turn_ids": [turn_id], "timeout": 1}, status=409
    )
    assert refused["error"]["code"] == "stale_epoch"
    empty = await api.call(
        "POST", stops, headers=headers, json={"turn_ids": [], "timeout": 1}, status=400
    )
    assert empty["error"]["code"] == "invalid_input"
