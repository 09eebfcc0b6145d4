"""A timeline followed from below its retention boundary says so (spec/002: "Use the
retention boundary to detect unavailable earlier history"): the stream's
``retention`` event, the client's ``HistoryUnavailable``, the CLI's note."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from helmr.cli import main
from helmr.client import Client, SessionRef
from helmr.errors import HistoryUnavailable
from tests.unit.api import ADMIN, NAMESPACE, Api, bearer

RETENTION = timedelta(days=1)


@pytest.fixture
def retention() -> timedelta:
    return RETENTION


async def _session_with_a_gap(api: Api, client: Client) -> tuple[SessionRef, int]:
    """A cancelled session whose first records were removed by retention; and its boundary."""
    session, _ = await client.actors.start("reviewer", namespace=NAMESPACE, workspace="ws")
    for n in range(3):
        await session.enqueue(n)
    await api.control.expire_history(datetime.now(UTC) + 2 * RETENTION)
    boundary = (await session.events.list()).retained_after
    assert boundary == 3  # every record then was older than the retention period
    await session.enqueue("after the gap")
    await session.cancel()
    return session, boundary


async def _consume(session: SessionRef, seen: list[int]) -> None:
    async for record in session.events.stream(after=0):
        seen.append(record.sequence)


async def test_the_stream_sends_the_boundary_before_the_records_after_it(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, boundary = await _session_with_a_gap(api, client)
    response = await api.http.get(
        f"/v1/sessions/{session.id}/events/stream", params={"after": "1"}, headers=bearer(ADMIN)
    )
    frames = (await response.text()).split("\n\n")
    assert frames[0] == (
        f'event: retention\nid: {boundary}\ndata: {{"after":1,"retained_after":{boundary}}}'
    )
    assert frames[1].startswith(f"id: {boundary + 1}\n")
    # Resuming from the boundary (a browser's Last-Event-ID) is told nothing again.
    again = await api.http.get(
        f"/v1/sessions/{session.id}/events/stream",
        headers={**bearer(ADMIN), "Last-Event-ID": str(boundary)},
    )
    assert "event: retention" not in await again.text()


async def test_the_client_stream_raises_history_unavailable_and_follows_on_from_the_boundary(
    api: Api,
) -> None:
    async with Client(api.url, ADMIN) as client:
        session, boundary = await _session_with_a_gap(api, client)
        seen: list[int] = []
        with pytest.raises(HistoryUnavailable) as gap:
            await _consume(session, seen)
        assert seen == []  # no record past the gap came before the gap was told
        assert (gap.value.after, gap.value.retained_after) == (0, boundary)
        assert gap.value.details == {"after": 0, "retained_after": boundary}
        retained = [r async for r in session.events.stream(after=gap.value.retained_after)]
        assert retained == (await session.events.list(after=boundary)).records
        assert retained[0].sequence == boundary + 1
        assert retained[-1].kind == "session.closed"


async def test_the_cli_says_which_records_are_gone_and_follows_on(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, boundary = await _session_with_a_gap(api, client)
    env = {"HELMR_URL": api.url, "HELMR_TOKEN": ADMIN}
    for args in (["--follow"], []):
        result = await asyncio.to_thread(
            CliRunner().invoke, main, ["session", "events", session.id, *args], env=env
        )
        assert result.exit_code == 0, result.output
        assert (
            f"history unavailable: the records after 0 up to {boundary} were removed"
            in result.stderr
        )
        first = result.stdout.splitlines()[0].split()
        assert first[1] == str(boundary + 1)
