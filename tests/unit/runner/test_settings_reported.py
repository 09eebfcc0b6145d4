"""What ``actor(...)`` declares reaches the control plane over HTTP (the real app):
the runner's first receive carries it, the Session's unset limits take it, even
when that receive times out; a revision 1 control plane is told nothing."""

from __future__ import annotations

import dataclasses

import pytest

from helmr.errors import ReceiveTimeout
from helmr.runner import actor
from tests.unit.api import Api
from tests.unit.control.harness import DEFAULT_LIMITS
from tests.unit.runner.against_app import runner_session

SILENT = dataclasses.replace(DEFAULT_LIMITS, queue_limit=None, retry_max_attempts=None)


async def _run(session: object) -> None:
    return None


DECLARED = actor(id="reviewer", run=_run, queue=2, ttl=60).settings()


async def test_the_first_receive_reports_the_code_s_settings(api: Api) -> None:
    sid = await api.start()
    await api.control.resolve_limits(sid, SILENT)
    async with runner_session(api, sid, settings=DECLARED) as session:
        with pytest.raises(ReceiveTimeout):
            await session.receive(timeout=0.1)

    view = await api.call("GET", f"/v1/sessions/{sid}")
    assert (view["limits"]["queue_limit"], view["limits"]["idle_ttl"]) == (2, "PT1M")
    await api.enqueue(sid, 1)
    await api.enqueue(sid, 2)
    refused = await api.call("POST", f"/v1/sessions/{sid}/turns", json={"input": 3}, status=429)
    assert refused["error"]["details"]["queueLimit"] == 2


async def test_an_older_control_plane_is_told_nothing(api: Api) -> None:
    sid = await api.start()
    await api.control.resolve_limits(sid, SILENT)
    async with runner_session(api, sid, protocol=1, settings=DECLARED) as session:
        with pytest.raises(ReceiveTimeout):
            await session.receive(timeout=0.1)

    view = await api.call("GET", f"/v1/sessions/{sid}")
    assert (view["limits"]["queue_limit"], view["limits"]["idle_ttl"]) == (100, None)
