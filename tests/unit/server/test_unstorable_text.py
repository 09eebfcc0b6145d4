"""JSON the store cannot write is refused with a 400 naming where it is, never a 500.

A lone UTF-16 surrogate (``"\\ud800"`` without its pair) parses as JSON but is
not Unicode text: no store, log or other JSON reader can take it. Every test
runs on both stores (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.unit.api import ADMIN, NAMESPACE, Api, bearer

JSON = {"Content-Type": "application/json"}


async def _refused(api: Api, path: str, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    async with api.http.post(path, data=body, headers={**headers, **JSON}) as response:
        reply: dict[str, Any] = await response.json()
        assert response.status == 400, reply
    error: dict[str, Any] = reply["error"]
    assert error["code"] == "invalid_input", reply
    return error


@pytest.mark.parametrize(
    ("route", "body", "loc", "named"),
    [
        ("turns", rb'{"input": "\ud800"}', ["input"], "input"),
        ("turns", rb'{"input": 1, "idempotency_key": "k\udfff"}', ["idempotency_key"], None),
        ("send", rb'{"data": {"items": [1, 2, "a\uDC00b"]}}', ["data", "items", "2"], None),
        # A key is text too; the path names it escaped, so the reply is valid Unicode.
        ("send", rb'{"data": {"\ud83dx": 1}}', ["data", "\\ud83dx"], "data.\\ud83dx"),
        # A high surrogate followed by another high one is no pair.
        ("send", rb'{"data": ["\ud83d\ud83d"]}', ["data", "0"], "data[0]"),
    ],
)
async def test_a_lone_surrogate_is_refused_naming_its_field(
    api: Api, route: str, body: bytes, loc: list[str], named: str | None
) -> None:
    sid = await api.start()
    error = await _refused(api, f"/v1/sessions/{sid}/{route}", body, bearer(ADMIN))
    assert [e["loc"] for e in error["details"]["errors"]] == [["body", *loc]]
    assert error["details"]["errors"][0]["type"] == "lone_surrogate"
    if named is not None:
        assert f"body: {named}:" in error["message"]
    # Nothing was admitted.
    page = await api.call("GET", f"/v1/sessions/{sid}/events")
    assert page["records"] == []


async def test_every_route_that_takes_json_refuses_a_lone_surrogate(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid)
    _, runner = await api.run_turn(sid)
    doc = await api.call("GET", "/openapi.json", token="")
    values = {
        "namespace": NAMESPACE,
        "actor": "reviewer",
        "workspace": "ws",
        "session_id": sid,
        "turn_id": tid,
        "message_id": "msg_1",
        "outcome": "delivered",
    }
    routes = [
        re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)
        for path, item in doc["paths"].items()
        for operation in item.values()
        if "requestBody" in operation
    ]
    assert len(routes) >= 20  # every route that takes JSON: public and runner
    for route in routes:
        headers = runner if route.startswith("/runner/") else bearer(ADMIN)
        error = await _refused(api, route, rb'{"field": ["\udbff"]}', headers)
        assert error["details"]["errors"][0]["loc"] == ["body", "field", "0"], route


async def test_surrogate_pairs_are_text(api: Api) -> None:
    """An escaped pair is one character (U+1F600 here), kept as it was sent."""
    sid = await api.start()
    async with api.http.post(
        f"/v1/sessions/{sid}/turns",
        data=rb'{"input": {"\ud83d\ude00": "\ud83d\ude00"}}',
        headers={**bearer(ADMIN), **JSON},
    ) as response:
        assert response.status == 200, await response.text()
        turn = await response.json()
    assert turn["input"] == {"\U0001f600": "\U0001f600"}
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{turn['id']}"))["input"] == {
        "\U0001f600": "\U0001f600"
    }


# NUL is Unicode, and JSON payloads keep it (escaped in their JSON text); the text
# the store keeps as a column (keys, ids, reasons) cannot hold it on PostgreSQL.


async def test_a_payload_keeps_its_nul_characters(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid, {"a\u0000": "b\u0000c"})
    turn = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}")
    assert turn["input"] == {"a\u0000": "b\u0000c"}


@pytest.mark.parametrize(
    ("route", "body", "loc"),
    [
        ("start", {"workspace": "ws-2", "key": "a\u0000"}, ["body", "key"]),
        ("start", {"workspace": "ws-2", "idempotency_key": "\u0000"}, ["body", "idempotency_key"]),
        ("turns", {"input": 1, "idempotency_key": "k\u0000"}, ["body", "idempotency_key"]),
        ("cancel", {"idempotency_key": "k\u0000"}, ["body", "idempotency_key"]),
        ("resume", {"hold_id": "hold\u0000"}, ["body", "hold_id"]),
        ("nul%00/turns", {"input": 1}, ["path", "session_id"]),
    ],
)
async def test_nul_in_text_the_store_keeps_is_refused_naming_its_field(
    api: Api, route: str, body: dict[str, Any], loc: list[str]
) -> None:
    sid = await api.start()
    path = {
        "start": f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions",
        "nul%00/turns": f"/v1/sessions/{sid}{route}",
    }.get(route, f"/v1/sessions/{sid}/{route}")
    error = await _refused(api, path, json.dumps(body).encode(), bearer(ADMIN))
    assert [e["loc"] for e in error["details"]["errors"]] == [loc]


async def test_nul_in_text_a_runner_sends_is_refused_naming_its_field(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid)
    tid, runner = await api.run_turn(sid)
    base = f"/runner/v1/sessions/{sid}"
    for path, body, loc in [
        (
            f"{base}/turns/{tid}/output",
            {"value": 1, "idempotency_key": "\u0000"},
            ["idempotency_key"],
        ),
        (f"{base}/stops", {"turn_ids": [tid, "t\u0000"], "timeout": 1}, ["turn_ids", "1"]),
        (f"{base}/turns/{tid}/messages/m\u0000/delivered", {}, None),
        (f"{base}/turns/{tid}/messages/msg_1/rejected", {"reason": "r\u0000"}, ["reason"]),
    ]:
        error = await _refused(
            api, path.replace("\u0000", "%00"), json.dumps(body).encode(), runner
        )
        expected = ["path", "message_id"] if loc is None else ["body", *loc]
        assert [e["loc"] for e in error["details"]["errors"]] == [expected], path
