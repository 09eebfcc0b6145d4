"""The PostgreSQL server down under the API: every request answers 503 with
Retry-After (``Unavailable``), never a bare 500, in bounded time; once it is back
the pool reconnects on its own and what was acknowledged before is there."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from helmr.store import postgres as backend
from tests.postgres import PostgresServer
from tests.unit.api import ADMIN, Api, bearer

pytestmark = pytest.mark.parametrize("store_location", ["postgresql"], indirect=True)

CONNECT_WAIT = 1.0


@pytest.fixture
def short_connect_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requested before ``api``: its store's pool is made with this wait."""
    monkeypatch.setattr(backend, "CONNECT_WAIT", CONNECT_WAIT)


async def _status(api: Api, method: str, path: str, **kwargs: Any) -> tuple[int, Any, str | None]:
    headers = {**bearer(ADMIN), **kwargs.pop("headers", {})}
    async with api.http.request(method, path, headers=headers, **kwargs) as response:
        return response.status, await response.json(), response.headers.get("Retry-After")


async def test_a_store_outage_answers_503_with_retry_after_and_nothing_acknowledged_is_lost(
    short_connect_wait: None, postgres_server: PostgresServer, api: Api
) -> None:
    session = await api.start()
    acknowledged = await api.enqueue(session, "before")
    turn, runner = await api.run_turn(session)
    assert turn == acknowledged
    base = f"/runner/v1/sessions/{session}"
    await asyncio.to_thread(postgres_server.halt)
    try:
        requests = [
            ("GET", f"/v1/sessions/{session}", {}),
            ("POST", f"/v1/sessions/{session}/turns", {"json": {"input": "during"}}),
            ("POST", f"{base}/turns/{turn}/complete", {"headers": runner, "json": {}}),
        ]
        for method, path, kwargs in requests:
            asked = time.monotonic()
            status, body, retry_after = await _status(api, method, path, **kwargs)
            assert (status, body["error"]["code"], retry_after) == (503, "unavailable", "1"), body
            assert time.monotonic() - asked < CONNECT_WAIT + 3  # bounded, not psycopg's 30 s
    finally:
        await asyncio.to_thread(postgres_server.resume)
    # The pool reconnects by itself: the runner repeats its call, as it does on a 503.
    async with asyncio.timeout(30):
        while True:
            status, body, _ = await _status(
                api, "POST", f"{base}/turns/{turn}/complete", headers=runner, json={}
            )
            if status == 200:
                break
            assert status == 503, body
            await asyncio.sleep(0.2)
    view = await api.call("GET", f"/v1/sessions/{session}/turns/{turn}")
    assert view["status"] == "completed"
    later = await api.enqueue(session, "after")
    # The turn refused during the outage was not admitted: only the acknowledged ones were.
    page = await api.call("GET", f"/v1/sessions/{session}/events")
    queued = [e["turn_id"] for e in page["records"] if e["kind"] == "turn.queued"]
    assert queued == [acknowledged, later]
