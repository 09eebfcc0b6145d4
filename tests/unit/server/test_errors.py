"""Every bad request gets a 4xx with a JSON error body, never a 5xx."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from helmr.kube import errors as kube_errors
from helmr.protocol import EPOCH_HEADER
from helmr.server.errors import CLIENT_LEFT, failure_response
from tests.unit.api import (
    ADMIN,
    NAMESPACE,
    OUTSIDER,
    READER,
    Api,
    bearer,
)

JSON = {"Content-Type": "application/json"}


async def _error(
    api: Api,
    method: str,
    path: str,
    status: int,
    code: str,
    *,
    token: str | None = ADMIN,
    **kwargs: Any,
) -> dict[str, Any]:
    headers = {**(bearer(token) if token else {}), **kwargs.pop("headers", {})}
    async with api.http.request(method, path, headers=headers, **kwargs) as response:
        assert response.content_type == "application/json"
        body: dict[str, Any] = await response.json()
        assert response.status == status, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("after=-1", "after"),
        (f"after={2**53}", "after"),
        ("after=1.5", "after"),
        ("after=1_000", "after"),
        ("after=+1", "after"),
        ("after=", "after"),
    ],
)
async def test_events_page_bounds(api: Api, query: str, field: str) -> None:
    sid = await api.start()
    body = await _error(api, "GET", f"/v1/sessions/{sid}/events?{query}", 400, "invalid_input")
    assert body["error"]["details"]["errors"][0]["loc"] == ["query", field]


async def test_events_page_accepts_the_extremes(api: Api) -> None:
    sid = await api.start()
    for query in ("limit=1", "limit=1000", "after=0", f"after={2**53 - 1}"):
        page = await api.call("GET", f"/v1/sessions/{sid}/events?{query}")
        assert page["records"] == []


async def test_repeated_query_parameter(api: Api) -> None:
    sid = await api.start()
    await _error(api, "GET", f"/v1/sessions/{sid}/events?after=1&after=2", 400, "invalid_input")


@pytest.mark.parametrize(
    "header",
    ["-1", str(2**53), "x", "1e3"],
)
async def test_stream_cursor_header_bounds(api: Api, header: str) -> None:
    sid = await api.start()
    await _error(
        api,
        "GET",
        f"/v1/sessions/{sid}/events/stream",
        400,
        "invalid_input",
        headers={"Last-Event-ID": header},
    )


@pytest.mark.parametrize("seconds", ["-1", "301", "nan", "inf", "soon"])
async def test_wait_timeout_bounds(api: Api, seconds: str) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid)
    await _error(
        api, "GET", f"/v1/sessions/{sid}/turns/{tid}/wait?timeout={seconds}", 400, "invalid_input"
    )


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{", "truncated"),
        (b'{"input": NaN}', "NaN is not JSON"),
        (b'{"input": Infinity}', "Infinity is not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "not an object"),
        (b'"input"', "not an object"),
        (b"[" * 100_000 + b"]" * 100_000, "nested past the parser's depth"),
        (b'{"input": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested past the model's depth"),
        (b"{}", "input missing"),
        (b'{"input": 1, "idempotencyKey": "k"}', "camelCase field"),
        (b'{"input": 1, "idempotency_key": ""}', "empty key"),
        (b'{"input": 1, "idempotency_key": 5}', "key not a string"),
    ],
)
async def test_malformed_bodies(api: Api, data: bytes, why: str) -> None:
    sid = await api.start()
    await _error(
        api, "POST", f"/v1/sessions/{sid}/turns", 400, "invalid_input", data=data, headers=JSON
    )


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_wrong_content_type(api: Api, content_type: str) -> None:
    sid = await api.start()
    await _error(
        api,
        "POST",
        f"/v1/sessions/{sid}/turns",
        415,
        "unsupported_media_type",
        data=b'{"input": 1}',
        headers={"Content-Type": content_type},
    )


async def test_oversize_body(api: Api) -> None:
    sid = await api.start()
    # A file-like body: aiohttp warns that sending large raw bytes may block its loop.
    big = io.BytesIO(b'{"input": "' + b"x" * (1 << 20) + b'"}')
    await _error(
        api, "POST", f"/v1/sessions/{sid}/turns", 413, "payload_too_large", data=big, headers=JSON
    )


async def test_unknown_session_and_turn(api: Api) -> None:
    sid = await api.start()
    other = await api.start("ws-2")
    tid = await api.enqueue(other)
    await _error(api, "GET", "/v1/sessions/ses_nope", 404, "not_found")
    await _error(api, "GET", "/v1/sessions/ses_nope/events", 404, "not_found")
    await _error(api, "POST", "/v1/sessions/ses_nope/turns", 404, "not_found", json={"input": 1})
    await _error(api, "GET", f"/v1/sessions/{sid}/turns/turn_nope", 404, "not_found")
    # A turn of another session is unknown here.
    await _error(api, "GET", f"/v1/sessions/{sid}/turns/{tid}", 404, "not_found")
    await _error(api, "GET", f"/v1/sessions/{sid}/turns/{tid}/wait?timeout=0", 404, "not_found")


async def test_unknown_route_and_method(api: Api) -> None:
    await _error(api, "GET", "/v1/nothing-here", 404, "not_found")
    async with api.http.request("DELETE", "/healthz") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "GET"
        assert (await response.json())["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/namespaces/Team_A/actors/reviewer/sessions",  # not a DNS label
        "/v1/namespaces/team-a/actors/-reviewer/sessions",
    ],
)
async def test_bad_names_in_path(api: Api, path: str) -> None:
    await _error(api, "POST", path, 400, "invalid_input", json={"workspace": "ws"})


async def test_start_needs_a_valid_workspace(api: Api) -> None:
    path = f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions"
    await _error(api, "POST", path, 400, "invalid_input", json={})
    await _error(api, "POST", path, 400, "invalid_input", json={"workspace": "WS"})


async def test_public_authentication_and_authorization(api: Api) -> None:
    sid = await api.start()
    path = f"/v1/sessions/{sid}"
    await _error(api, "GET", path, 401, "unauthenticated", token=None)
    await _error(api, "GET", path, 401, "unauthenticated", token="nobody")
    await _error(api, "GET", path, 401, "unauthenticated", headers={"Authorization": "Basic x"})
    await _error(api, "GET", path, 403, "forbidden", token=OUTSIDER)
    await api.call("GET", path, token=READER)
    await _error(api, "POST", path + "/turns", 403, "forbidden", token=READER, json={"input": 1})
    await _error(
        api,
        "POST",
        f"/v1/namespaces/{NAMESPACE}/actors/a/sessions",
        403,
        "forbidden",
        token=OUTSIDER,
        json={"workspace": "w"},
    )
    # Credentials are checked before the input: a stranger learns nothing about it.
    await _error(api, "GET", path + "/events?limit=0", 401, "unauthenticated", token="nobody")


async def test_runner_authentication(api: Api) -> None:
    sid = await api.start()
    other = await api.start("ws-2")
    headers = await api.runner(sid)
    await api.runner(other)
    receive = f"/runner/v1/sessions/{sid}/receive"
    body = {"timeout": 0.01}
    await _error(api, "POST", receive, 401, "unauthenticated", token=None, json=body)
    # The other session's runner token does not open this session.
    epoch = {EPOCH_HEADER: headers[EPOCH_HEADER]}
    await _error(
        api, "POST", receive, 403, "forbidden", token=f"runner-{other}", json=body, headers=epoch
    )
    # Nor does a Kubernetes token.
    await _error(api, "POST", receive, 403, "forbidden", json=body, headers=epoch)
    token = headers["Authorization"].removeprefix("Bearer ")
    await _error(api, "POST", receive, 400, "invalid_input", token=token, json=body)
    await _error(
        api,
        "POST",
        receive,
        400,
        "invalid_input",
        token=token,
        json=body,
        headers={EPOCH_HEADER: "one"},
    )
    await _error(
        api,
        "POST",
        receive,
        409,
        "stale_epoch",
        token=token,
        json=body,
        headers={EPOCH_HEADER: str(int(headers[EPOCH_HEADER]) + 1)},
    )


async def test_runner_bodies(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid)
    tid, headers = await api.run_turn(sid)
    base = f"/runner/v1/sessions/{sid}"
    token = headers["Authorization"].removeprefix("Bearer ")
    epoch = {EPOCH_HEADER: headers[EPOCH_HEADER]}
    for path, body in [
        (f"{base}/receive", {}),  # timeout is required
        (f"{base}/receive", {"timeout": 0}),
        (f"{base}/output", {"value": 1}),  # the idempotency key is required
        (f"{base}/turns/{tid}/fail", {"error": {"code": "", "message": "m"}}),
        (f"{base}/turns/{tid}/complete", {"result": 1, "extra": 2}),
        (f"{base}/turns/{tid}/messages/m/sideways", {}),
    ]:
        await _error(api, "POST", path, 400, "invalid_input", token=token, json=body, headers=epoch)


async def test_state_conflicts(api: Api) -> None:
    sid = await api.start()
    queued = await api.enqueue(sid, 1)
    await _error(
        api,
        "POST",
        f"/v1/sessions/{sid}/turns/{queued}/send",
        409,
        "turn_not_active",
        json={"data": 1},
    )
    await _error(
        api,
        "POST",
        f"/v1/sessions/{sid}/turns/{queued}/interrupt",
        409,
        "turn_not_active",
        json={},
    )
    receipt = await api.call("POST", f"/v1/sessions/{sid}/interrupt", json={})
    await _error(api, "POST", f"/v1/sessions/{sid}/send", 409, "session_held", json={"data": 1})
    await _error(
        api, "POST", f"/v1/sessions/{sid}/resume", 409, "hold_mismatch", json={"hold_id": "h"}
    )
    await api.call("POST", f"/v1/sessions/{sid}/resume", json={"hold_id": receipt["hold_id"]})
    await api.call("POST", f"/v1/sessions/{sid}/cancel", json={})
    await _error(
        api, "POST", f"/v1/sessions/{sid}/turns", 409, "session_not_open", json={"input": 1}
    )


async def test_workspace_owned_by_another_session(api: Api) -> None:
    await api.start("shared")
    await _error(
        api,
        "POST",
        f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions",
        409,
        "conflict",
        json={"workspace": "shared"},
    )


async def test_a_client_that_left_mid_answer_is_no_server_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = make_mocked_request("POST", "/runner/v1/sessions/s/receive")
    gone = ConnectionResetError("Cannot write to closing transport")
    with caplog.at_level(logging.INFO, logger="helmr.server.errors"):
        response = failure_response(request, gone)
    assert response is not None
    assert response.status == CLIENT_LEFT
    assert [r.levelno for r in caplog.records] == [logging.INFO]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (
            kube_errors.Forbidden("ValidatingAdmissionPolicy 'p' denied request: held"),
            403,
            "forbidden",
        ),
        (kube_errors.NotFound('workspaces.helmr.dev "w" not found'), 404, "not_found"),
        (kube_errors.Conflict("the object has been modified"), 409, "conflict"),
        (
            kube_errors.Invalid('Workspace.helmr.dev "w" is invalid: spec.size'),
            400,
            "invalid_input",
        ),
        (kube_errors.BadRequest("bad"), 400, "invalid_input"),
        (kube_errors.Unauthorized("Unauthorized"), 503, "unavailable"),
        (kube_errors.TooManyRequests("slow down"), 503, "unavailable"),
        (kube_errors.ServerError("etcdserver: request timed out", status=504), 503, "unavailable"),
        (kube_errors.KubeError("teapot", status=418), 503, "unavailable"),
    ],
)
async def test_a_kubernetes_refusal_is_answered_with_its_message_never_a_500(
    error: kube_errors.KubeError, status: int, code: str
) -> None:
    request = make_mocked_request("DELETE", "/v1/namespaces/ns/workspaces/w")
    response = failure_response(request, error)
    assert isinstance(response, web.Response)
    assert response.status == status
    assert response.text is not None
    body = json.loads(response.text)
    assert body["error"]["code"] == code
    assert error.message in body["error"]["message"]
