"""``session.receive(metadata=..., tags=...)`` (spec/001: "`session.receive({ timeout?,
idleTimeout?, metadata?, tags? })`"): the application's metadata and tags are recorded
on the ``turn.running`` event of the turn the receive starts."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.errors import HelmrError, InvalidInput
from helmr.events import EventKind
from helmr.protocol import ReceiveRequest, to_json
from tests.unit.api import Api
from tests.unit.runner.against_app import runner_session


async def _running_data(api: Api, session_id: str) -> list[Any]:
    page = await api.control.list_events(session_id)
    return [e.data for e in page.records if e.kind == EventKind.TURN_RUNNING]


async def test_metadata_and_tags_are_recorded_on_the_turn_running_event(api: Api) -> None:
    sid = await api.start()
    await api.enqueue(sid, "first")
    await api.enqueue(sid, "second")
    async with runner_session(api, sid) as session:
        first = await session.receive(
            timeout=5, metadata={"trace": "abc", "attempt": 1}, tags=["review", "APP-42"]
        )
        assert first is not None
        await first.complete()
        assert await session.receive(timeout=5) is not None

    epoch = (await api.control.get_session(sid)).process_epoch
    labelled = {"metadata": {"trace": "abc", "attempt": 1}, "tags": ["review", "APP-42"]}
    assert await _running_data(api, sid) == [
        {"processEpoch": epoch, **labelled},
        {"processEpoch": epoch},  # a receive that gives none records none
    ]


async def test_bad_metadata_or_tags_are_refused_naming_them(api: Api) -> None:
    sid = await api.start()
    async with runner_session(api, sid) as session:
        with pytest.raises(InvalidInput, match=r"receive\(metadata=...\)"):
            await session.receive(timeout=1, metadata=["not", "an"])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=r"receive\(tags=...\)"):
            await session.receive(timeout=1, tags="one-string")
        with pytest.raises(InvalidInput, match="tags"):  # the server's bounds
            await session.receive(timeout=1, tags=[""])


async def test_an_older_control_plane_gets_the_request_it_knows(api: Api) -> None:
    """A receive that gives neither sends no new field (an older server forbids unknown
    ones); one that gives them to a revision 1 control plane is refused unsent."""
    assert to_json(ReceiveRequest(timeout=1)) == {"timeout": 1, "idle_timeout": None}
    sid = await api.start()
    async with runner_session(api, sid, protocol=1) as session:
        with pytest.raises(HelmrError, match="needs runner protocol 2"):
            await session.receive(timeout=1, tags=["a"])
