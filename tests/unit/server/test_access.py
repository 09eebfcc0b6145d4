"""The guard of session routes remembers each session's namespace: the enqueue,
which does not take the session, is authorised without reading it again, and
still only for callers allowed in that namespace."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helmr.server import SessionNames, StaticAuthenticator, StaticRunnerTokens, build_app
from tests.compose import open_plane, static_app
from tests.unit.api import ADMIN, GRANTS, NAMESPACE, OUTSIDER, READER, Api, RecordingMirror


@pytest.fixture
async def counted(store_location: str | Path) -> AsyncIterator[tuple[Api, Counter[str]]]:
    """The API, and the store's transactions by kind from now on."""
    async with open_plane(store_location) as plane:
        transactions: Counter[str] = Counter()
        plane.store.observe = lambda kind, lane, seconds: transactions.update((kind,))
        mirror = RecordingMirror()
        tokens = StaticRunnerTokens()
        app = static_app(plane.control, GRANTS, tokens, mirror=mirror, workspaces=mirror)
        async with TestClient(TestServer(app)) as http:
            yield Api(plane.control, app, http, tokens, mirror), transactions


async def test_an_enqueue_reads_its_session_once_and_is_still_authorised(
    counted: tuple[Api, Counter[str]],
) -> None:
    api, transactions = counted
    session = await api.start()
    turns = f"/v1/sessions/{session}/turns"
    transactions.clear()
    first = await api.enqueue(session, "one")
    assert transactions == {"read": 1, "write": 1}  # the guard learns the namespace
    transactions.clear()
    second = await api.enqueue(session, "two")
    assert transactions == {"write": 1}  # the admission answers its session too
    assert api.mirror.turns == [first, second]
    # Remembered, the namespace is still checked against each caller.
    await api.call("POST", turns, token=OUTSIDER, status=403, json={"input": 3})
    await api.call("POST", turns, token=READER, status=403, json={"input": 3})
    assert (await api.call("GET", f"/v1/sessions/{session}", token=READER))["queued_turns"] == 2
    assert (await api.call("GET", f"/v1/sessions/{session}"))["namespace"] == NAMESPACE
    await api.call("POST", "/v1/sessions/ses_unknown/turns", token=ADMIN, status=404, json={})


async def test_a_restarted_api_with_its_names_loaded_reads_no_session_to_authorise(
    store_location: str | Path,
) -> None:
    """As the control plane starts: the names of the Sessions not ended are loaded
    before it listens, so the first enqueue after a restart is one write."""
    async with open_plane(store_location) as plane:
        mirror = RecordingMirror()
        before = static_app(plane.control, GRANTS, mirror=mirror, workspaces=mirror)
        async with TestClient(TestServer(before)) as http:
            session = await Api(plane.control, before, http, StaticRunnerTokens(), mirror).start()

        names = SessionNames(plane.control)
        await names.load()
        transactions: Counter[str] = Counter()
        plane.store.observe = lambda kind, lane, seconds: transactions.update((kind,))
        restarted = build_app(
            plane.control,
            StaticAuthenticator(GRANTS),
            StaticRunnerTokens(),
            mirror=mirror,
            session_names=names,
        )
        async with TestClient(TestServer(restarted)) as http:
            api = Api(plane.control, restarted, http, StaticRunnerTokens(), mirror)
            await api.enqueue(session, "after the restart")
            assert transactions == {"write": 1}
            turns = f"/v1/sessions/{session}/turns"
            await api.call("POST", turns, token=OUTSIDER, status=403, json={"input": 3})


async def test_a_session_read_by_a_route_that_takes_it_is_kept_for_the_enqueue(
    counted: tuple[Api, Counter[str]],
) -> None:
    api, transactions = counted
    session = await api.start()
    transactions.clear()
    await api.call("GET", f"/v1/sessions/{session}")
    assert transactions == {"read": 1}
    transactions.clear()
    await api.enqueue(session, "one")
    assert transactions == {"write": 1}
