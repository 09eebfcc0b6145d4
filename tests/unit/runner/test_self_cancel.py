"""An actor cancels its own Session (spec/001: "Cancellation also works through a
runtime Session reference inside an Actor"): ``session.cancel()`` of the actor SDK
over HTTP against the real app, and refused without a call by a control plane
whose runner protocol lacks it."""

from __future__ import annotations

import pytest

from helmr.errors import HelmrError, StaleEpoch, TurnNotActive
from helmr.protocol import ExitCode
from tests.unit.api import Api
from tests.unit.runner.against_app import runner_session


async def test_an_actor_cancels_its_own_session(api: Api) -> None:
    sid = await api.start()
    first = await api.enqueue(sid, "running")
    queued = await api.enqueue(sid, "never runs")
    async with runner_session(api, sid) as session:
        turn = await session.receive(timeout=5)
        assert turn is not None
        assert turn.id == first

        await session.cancel()
        await session.cancel()  # cancelling again changes nothing

        state = await api.control.get_session(sid)
        assert state.status == "closing"
        assert state.cancel_requested_at is not None
        assert (await api.control.get_turn(sid, queued)).status == "cancelled"
        with pytest.raises(TurnNotActive):  # its stop was accepted: let go of it
            await turn.output.write("more")
        assert await session.receive(timeout=5) is None  # letting go; no more turns

    await api.control.process_exited(sid, state.process_epoch, ExitCode.OK)
    state = await api.control.get_session(sid)
    assert (state.status, state.closed_how) == ("closed", "cancel")
    interrupted = await api.control.get_turn(sid, first)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "cancel")


async def test_a_fenced_process_cannot_cancel_the_session(api: Api) -> None:
    sid = await api.start()
    async with runner_session(api, sid, epoch=0) as stale:
        with pytest.raises(StaleEpoch):
            await stale.cancel()
    assert (await api.control.get_session(sid)).status == "open"


async def test_an_older_control_plane_is_not_asked_to_cancel(api: Api) -> None:
    sid = await api.start()
    async with runner_session(api, sid, protocol=1) as session:
        with pytest.raises(HelmrError, match=r"session.cancel\(\) needs runner protocol 2"):
            await session.cancel()
    assert (await api.control.get_session(sid)).cancel_requested_at is None
