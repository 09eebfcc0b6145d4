"""Happy paths of every route, over the real Control and a SQLite store."""

from __future__ import annotations

from typing import Any

from helmr.events import EventKind
from tests.unit.api import (
    NAMESPACE,
    Api,
)


async def test_start_is_idempotent_and_mirrored(api: Api) -> None:
    path = f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions"
    body = {"workspace": "ws", "key": "review-7", "idempotency_key": "start-1"}
    first = await api.call("POST", path, json=body)
    again = await api.call("POST", path, json=body)
    session = first["session"]
    assert again["session"]["id"] == session["id"]
    assert (session["namespace"], session["actor"], session["workspace"], session["key"]) == (
        NAMESPACE,
        "reviewer",
        "ws",
        "review-7",
    )
    assert session["status"] == "open"
    assert first["run"] is None  # no runner process yet
    # The mirror is asked again on a repeat, so a failed first attempt heals.
    assert api.mirror.sessions == [session["id"], session["id"]]
    assert await api.call("GET", f"/v1/sessions/{session['id']}") == session


async def test_start_reports_the_live_run(api: Api) -> None:
    sid = await api.start(idempotency_key="s")
    headers = await api.runner(sid)
    again = await api.call(
        "POST",
        f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions",
        json={"workspace": "ws", "idempotency_key": "s"},
    )
    assert again["run"] == {"process_epoch": int(headers["Helmr-Process-Epoch"])}


async def test_enqueue_is_fifo_and_idempotent(api: Api) -> None:
    sid = await api.start()
    first = await api.call(
        "POST", f"/v1/sessions/{sid}/turns", json={"input": {"n": 1}, "idempotency_key": "a"}
    )
    second = await api.call("POST", f"/v1/sessions/{sid}/turns", json={"input": None})
    repeat = await api.call(
        "POST", f"/v1/sessions/{sid}/turns", json={"input": {"n": 9}, "idempotency_key": "a"}
    )
    assert (first["sequence"], second["sequence"]) == (1, 2)
    assert repeat["id"] == first["id"]
    assert repeat["input"] == {"n": 1}
    assert second["input"] is None
    assert second["status"] == "queued"
    assert api.mirror.turns == [first["id"], second["id"], first["id"]]
    got = await api.call("GET", f"/v1/sessions/{sid}/turns/{first['id']}")
    assert got == first


async def test_a_failed_mirror_does_not_fail_the_admission(api: Api) -> None:
    api.mirror.broken = True
    sid = await api.start(idempotency_key="s")
    tid = await api.enqueue(sid, "work", idempotency_key="t")
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}"))["status"] == "queued"
    assert (api.mirror.sessions, api.mirror.turns) == ([], [])
    # Repeating the idempotent requests heals the mirror.
    api.mirror.broken = False
    assert await api.start(idempotency_key="s") == sid
    assert await api.enqueue(sid, "work", idempotency_key="t") == tid
    assert (api.mirror.sessions, api.mirror.turns) == ([sid], [tid])


async def test_wait_timeout_ends_the_wait_not_the_turn(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid, "x")
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}/wait?timeout=0")
    assert view["timeout"] is True
    assert view["status"] == "queued"
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}"))["status"] == "queued"


async def test_a_whole_turn_through_the_runner_api(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid, {"issue": "APP-42"})
    base = f"/runner/v1/sessions/{sid}"
    received, headers = await api.run_turn(sid)
    assert received == tid

    def runner(path: str, body: dict[str, Any]) -> Any:
        return api.call("POST", f"{base}{path}", headers=headers, json=body)

    # Receiving again while the turn is unsettled answers the same turn.
    again = await runner("/receive", {"timeout": 1})
    assert again["id"] == tid
    assert again["input"] == {"issue": "APP-42"}
    assert again["sequence"] == 1
    assert again["source"] == "api"

    sent = await api.call("POST", f"/v1/sessions/{sid}/send", json={"data": {"type": "hint"}})
    assert sent["kind"] == "messaged"
    assert sent["turn"]["id"] == tid
    exact = await api.call(
        "POST", f"/v1/sessions/{sid}/turns/{tid}/send", json={"data": {"type": "stop"}}
    )
    assert exact["kind"] == "messaged"
    assert exact["message"]["turn_id"] == tid

    assert await runner(f"/turns/{tid}/messages/ready", {}) == {"ok": True}
    for message, outcome, reason in [
        (sent["message"], "delivered", None),
        (exact["message"], "rejected", "not now"),
    ]:
        got = await runner(f"/turns/{tid}/messages/next", {"timeout": 1})
        assert got["message"] == {"id": message["id"], "data": message["data"]}
        mid = message["id"]
        assert await runner(f"/turns/{tid}/messages/{mid}/started", {}) == {"ok": True}
        assert await runner(f"/turns/{tid}/messages/{mid}/{outcome}", {"reason": reason}) == {
            "ok": True
        }
    assert await runner(f"/turns/{tid}/messages/next", {"timeout": 0.01}) == {"message": None}

    assert await runner(f"/turns/{tid}/output", {"value": "Checking", "idempotency_key": "o1"})
    assert await runner(f"/turns/{tid}/output", {"value": "Checking", "idempotency_key": "o1"})
    assert await runner("/output", {"value": {"note": 1}, "idempotency_key": "s1"})
    assert await runner(f"/turns/{tid}/respond", {"value": "The build is green."})
    assert await runner(f"/turns/{tid}/complete", {"result": {"status": "green"}})
    # Repeating the complete that settled the turn answers 200 again.
    assert await runner(f"/turns/{tid}/complete", {"result": {"status": "green"}})

    done = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}/wait?timeout=5")
    assert done["timeout"] is False
    assert done["status"] == "completed"
    assert (done["has_result"], done["result"]) == (True, {"status": "green"})
    assert (done["has_response"], done["response"]) == (True, "The build is green.")

    page = await api.call("GET", f"/v1/sessions/{sid}/events?after=0&limit=1000")
    kinds = [r["kind"] for r in page["records"]]
    assert kinds == [
        "turn.queued",
        "turn.running",
        "message.admitted",
        "message.admitted",
        "message.started",
        "message.delivered",
        "message.started",
        "message.rejected",
        "turn.output",  # the repeated write is recorded once
        "turn.output",
        "turn.completed",
    ]
    outputs = [r for r in page["records"] if r["kind"] == EventKind.TURN_OUTPUT]
    assert outputs[0]["data"] == [{"type": "text", "text": "Checking"}]
    assert outputs[0]["turn_id"] == tid
    assert outputs[1]["turn_id"] is None
    assert outputs[0]["process_epoch"] == int(headers["Helmr-Process-Epoch"])


async def test_complete_without_result_and_fail(api: Api) -> None:
    sid = await api.start()
    first = await api.enqueue(sid)
    second = await api.enqueue(sid)
    tid, headers = await api.run_turn(sid)
    assert tid == first
    base = f"/runner/v1/sessions/{sid}"
    await api.call("POST", f"{base}/turns/{tid}/complete", headers=headers, json={})
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}")
    assert (view["status"], view["has_result"], view["result"]) == ("completed", False, None)

    nxt = await api.call("POST", f"{base}/receive", headers=headers, json={"timeout": 1})
    assert nxt["id"] == second
    error = {"code": "boom", "message": "it broke"}
    await api.call("POST", f"{base}/turns/{second}/fail", headers=headers, json={"error": error})
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{second}/wait?timeout=1")
    assert (view["status"], view["error"]) == ("failed", error)


async def test_send_to_an_idle_session_enqueues(api: Api) -> None:
    sid = await api.start()
    sent = await api.call("POST", f"/v1/sessions/{sid}/send", json={"data": {"q": 1}})
    assert sent["kind"] == "enqueued"
    assert sent["message"] is None
    assert sent["turn"]["input"] == {"q": 1}
    assert sent["turn"]["status"] == "queued"
    assert api.mirror.turns == [sent["turn"]["id"]]


async def test_interrupts_and_resume(api: Api) -> None:
    sid = await api.start()
    first = await api.enqueue(sid)
    queued = await api.enqueue(sid)
    tid, runner = await api.run_turn(sid)
    receipt = await api.call("POST", f"/v1/sessions/{sid}/turns/{tid}/interrupt", json={})
    assert (receipt["turn_id"], receipt["scope"]) == (first, "turn")
    # Accepted, not converged: the Turn runs until its process lets go of it.
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}")
    assert view["status"] == "running"
    early = await api.call(
        "POST", f"/v1/sessions/{sid}/resume", json={"hold_id": receipt["hold_id"]}, status=409
    )
    assert early["error"]["code"] == "hold_not_converged"
    await api.call(
        "POST",
        f"/runner/v1/sessions/{sid}/receive",
        headers=runner,
        json={"timeout": 0.01},
        status=408,  # held: no next Turn, but the runner has let go
    )
    view = await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}")
    assert (view["status"], view["reason"]) == ("interrupted", "interrupt")

    held = await api.call("POST", f"/v1/sessions/{sid}/interrupt")  # no body at all
    assert held == receipt  # the Session is already held by the exact-Turn interrupt
    session = await api.call("GET", f"/v1/sessions/{sid}")
    assert (session["hold"]["hold_id"], session["hold"]["converged"]) == (held["hold_id"], True)
    # A held session still admits FIFO work.
    await api.enqueue(sid)
    resumed = await api.call(
        "POST", f"/v1/sessions/{sid}/resume", json={"hold_id": held["hold_id"]}
    )
    assert resumed["hold"] is None
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{queued}"))["status"] == "queued"


async def test_cancel_and_close(api: Api) -> None:
    sid = await api.start()
    tid = await api.enqueue(sid)
    cancelled = await api.call(
        "POST", f"/v1/sessions/{sid}/cancel", json={"idempotency_key": "stop-review"}
    )
    assert cancelled["cancel_requested_at"] is not None
    assert cancelled["status"] == "closed"  # no process was running
    assert cancelled["closed_how"] == "cancel"
    again = await api.call("POST", f"/v1/sessions/{sid}/cancel", json={})
    assert again == cancelled
    assert (await api.call("GET", f"/v1/sessions/{sid}/turns/{tid}"))["status"] == "cancelled"

    other = await api.start("ws-2")
    closed = await api.call("POST", f"/v1/sessions/{other}/close", json={})
    assert (closed["status"], closed["closed_how"]) == ("closed", "close")


async def test_event_pages(api: Api) -> None:
    sid = await api.start()
    for n in range(5):
        await api.enqueue(sid, n)
    page = await api.call("GET", f"/v1/sessions/{sid}/events?after=0&limit=2")
    assert [r["sequence"] for r in page["records"]] == [1, 2]
    assert (page["next_after"], page["has_more"], page["retained_after"]) == (2, True, 0)
    record = page["records"][0]
    assert set(record) == {
        "id",
        "session_id",
        "turn_id",
        "sequence",
        "created_at",
        "kind",
        "data",
        "process_epoch",
    }
    rest = await api.call("GET", f"/v1/sessions/{sid}/events?after=2")
    assert [r["sequence"] for r in rest["records"]] == [3, 4, 5]
    assert (rest["next_after"], rest["has_more"]) == (5, False)
    empty = await api.call("GET", f"/v1/sessions/{sid}/events?after=99")
    assert (empty["records"], empty["next_after"], empty["has_more"]) == ([], 99, False)


async def test_probes_and_metrics(api: Api) -> None:
    assert await api.call("GET", "/healthz", token="") == {"status": "ok"}
    assert await api.call("GET", "/readyz", token="") == {"status": "ok", "leader": True}
    sid = await api.start()
    for _ in range(2):  # the second is counted on the children the first made
        await api.call("GET", f"/v1/sessions/{sid}/events?limit=0", status=400)
    async with api.http.get("/metrics") as response:
        assert response.status == 200
        text = await response.text()
    labels = 'method="GET",route="/v1/sessions/{session_id}/events"'
    assert f'helmr_api_requests_total{{{labels},status="400"}} 2.0' in text
    assert f"helmr_api_request_duration_seconds_count{{{labels}}} 2.0" in text
    assert 'helmr_api_request_duration_seconds_count{method="POST",route=' in text
