"""Computer disk pressure in the state machine (spec/002 ``session.storage_pressure``):
episodes that pause, stop and resolve from the runner's usage reports."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.control import HoldView, StorageLimits
from helmr.errors import ReceiveTimeout, StaleEpoch
from tests.unit.control.harness import Harness

MIB = 1 << 20
LIMITS = StorageLimits(capacity_bytes=100 * MIB, pause_at=0.90, stop_at=0.98, resolve_at=0.85)
PAUSE, STOP, STEADY, CLEAR = 92 * MIB, 99 * MIB, 87 * MIB, 50 * MIB


async def _pressure(h: Harness, session_id: str) -> list[dict[str, Any]]:
    events = await h.events(session_id)
    return [e.data for e in events if e.kind == "session.storage_pressure"]  # type: ignore[misc]


async def _measured_session(h: Harness) -> tuple[str, int]:
    """A Session with thresholds and a live process; its id and the epoch."""
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    return session.id, await h.control.process_started(session.id)


async def _paused(h: Harness, session_id: str, epoch: int) -> HoldView:
    """Reports usage past pauseAt; the hold the pause put on the Session."""
    assert await h.control.report_storage(session_id, epoch, PAUSE) == "paused"
    hold = (await h.control.get_session(session_id)).hold
    assert hold is not None
    return hold


async def test_usage_at_pause_at_holds_queued_turns_and_lets_the_running_one_go_on(
    h: Harness,
) -> None:
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    epoch, running = await h.running(session.id)
    await h.control.enqueue(session.id, "next")

    assert await h.control.report_storage(session.id, epoch, PAUSE) == "paused"

    [paused] = await _pressure(h, session.id)
    view = await h.control.get_session(session.id)
    assert view.hold is not None
    assert view.hold.reason == "storage_pressure"
    assert paused == {
        "state": "paused",
        "usedBytes": PAUSE,
        "capacityBytes": LIMITS.capacity_bytes,
        "holdId": view.hold.hold_id,
    }
    # The running Turn continues and completes; the queued one waits.
    await h.control.complete(session.id, epoch, running.id, "done")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session.id, epoch, timeout=0.05)
    assert (await h.control.get_turn(session.id, running.id)).status == "completed"
    assert await h.control.sessions_under_storage_pressure() == 1


async def test_queued_turns_wait_until_the_pause_is_acknowledged(h: Harness) -> None:
    session_id, epoch = await _measured_session(h)
    await h.control.report_storage(session_id, epoch, PAUSE)
    queued = await h.control.enqueue(session_id, "clean up")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0.05)

    hold = (await h.control.get_session(session_id)).hold
    assert hold is not None
    await h.control.resume(session_id, hold.hold_id)
    turn = await h.control.receive(session_id, epoch, timeout=0)
    assert turn is not None
    assert turn.id == queued.id


async def test_an_acknowledged_episode_does_not_pause_again(h: Harness) -> None:
    session_id, epoch = await _measured_session(h)
    hold = await _paused(h, session_id, epoch)
    await h.control.resume(session_id, hold.hold_id)

    assert await h.control.report_storage(session_id, epoch, PAUSE + MIB) is None
    # Nothing running: even stopAt only keeps the episode paused.
    assert await h.control.report_storage(session_id, epoch, STOP) is None
    assert (await h.control.get_session(session_id)).hold is None
    assert [p["state"] for p in await _pressure(h, session_id)] == ["paused"]


async def test_repeated_reports_at_one_level_record_nothing_twice(h: Harness) -> None:
    session_id, epoch = await _measured_session(h)
    assert await h.control.report_storage(session_id, epoch, PAUSE) == "paused"
    assert await h.control.report_storage(session_id, epoch, PAUSE) is None
    assert await h.control.report_storage(session_id, epoch, PAUSE + MIB) is None
    # In the hysteresis band nothing changes either.
    assert await h.control.report_storage(session_id, epoch, STEADY) is None
    assert [p["state"] for p in await _pressure(h, session_id)] == ["paused"]
    # Below pauseAt without an episode is no news.
    other, other_epoch = await _measured_session(h)
    assert await h.control.report_storage(other, other_epoch, STEADY) is None
    assert await h.control.report_storage(other, other_epoch, CLEAR) is None
    assert await _pressure(h, other) == []


async def test_usage_at_stop_at_interrupts_the_running_turn_and_stops_its_process(
    h: Harness,
) -> None:
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    epoch, running = await h.running(session.id)
    paused_hold = await _paused(h, session.id, epoch)

    assert await h.control.report_storage(session.id, epoch, STOP) == "stopped"

    turn = await h.control.get_turn(session.id, running.id)
    assert (turn.status, turn.reason) == ("interrupted", "storage_exhausted")
    events = await h.events(session.id)
    [interrupted] = [e.data for e in events if e.kind == "turn.interrupted"]
    assert interrupted == {"reason": "storage_exhausted", "holdId": paused_hold.hold_id}
    _, stopped = await _pressure(h, session.id)
    assert stopped == {
        "state": "stopped",
        "usedBytes": STOP,
        "capacityBytes": LIMITS.capacity_bytes,
        "holdId": paused_hold.hold_id,  # the episode's open hold, reused
        "turnId": running.id,
    }
    [stop] = await h.control.processes_to_stop()
    assert (stop.epoch, stop.reason) == (epoch, "storage_exhausted")
    # Its end is a stop, not a failure.
    ended = await h.control.process_exited(session.id, epoch, 0)
    assert ended.outcome == "stopped"
    view = await h.control.get_session(session.id)
    assert view.hold is not None
    assert view.hold.hold_id == paused_hold.hold_id


async def test_a_new_episode_at_stop_at_goes_straight_to_stopped_with_its_own_hold(
    h: Harness,
) -> None:
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    epoch, running = await h.running(session.id)

    assert await h.control.report_storage(session.id, epoch, STOP) == "stopped"

    [stopped] = await _pressure(h, session.id)
    view = await h.control.get_session(session.id)
    assert view.hold is not None
    assert (view.hold.reason, stopped["holdId"]) == ("storage_pressure", view.hold.hold_id)
    assert (await h.control.get_turn(session.id, running.id)).reason == "storage_exhausted"


async def test_an_acknowledged_pause_still_stops_at_stop_at_and_an_acknowledged_stop_does_not(
    h: Harness,
) -> None:
    session_id, epoch = await _measured_session(h)
    first = await _paused(h, session_id, epoch)
    await h.control.resume(session_id, first.hold_id)
    await h.control.enqueue(session_id, "write more")
    writer = await h.control.receive(session_id, epoch, timeout=0)
    assert writer is not None

    assert await h.control.report_storage(session_id, epoch, STOP) == "stopped"
    second = (await h.control.get_session(session_id)).hold
    assert second is not None
    assert second.hold_id != first.hold_id
    await h.control.process_exited(session_id, epoch, 0)

    # Acknowledged: the next runner's Turn (the clean-up) is not stopped again.
    await h.control.resume(session_id, second.hold_id)
    epoch = await h.control.process_started(session_id)
    await h.control.enqueue(session_id, "clean up")
    cleaner = await h.control.receive(session_id, epoch, timeout=0)
    assert cleaner is not None
    assert await h.control.report_storage(session_id, epoch, STOP) is None
    assert (await h.control.get_turn(session_id, cleaner.id)).status == "running"
    assert [p["state"] for p in await _pressure(h, session_id)] == ["paused", "stopped"]


async def test_usage_below_resolve_at_resolves_the_episode_and_releases_its_hold(
    h: Harness,
) -> None:
    session_id, epoch = await _measured_session(h)
    hold = await _paused(h, session_id, epoch)

    assert await h.control.report_storage(session_id, epoch, CLEAR) == "resolved"

    assert (await h.control.get_session(session_id)).hold is None
    _, resolved = await _pressure(h, session_id)
    assert resolved == {
        "state": "resolved",
        "usedBytes": CLEAR,
        "capacityBytes": LIMITS.capacity_bytes,
        "holdId": hold.hold_id,
    }
    assert await h.control.sessions_under_storage_pressure() == 0
    # Resuming the released hold afterwards is accepted, as for any released hold.
    await h.control.resume(session_id, hold.hold_id)
    # A new episode is a new one: it pauses again, recorded anew.
    assert await h.control.report_storage(session_id, epoch, PAUSE) == "paused"
    assert [p["state"] for p in await _pressure(h, session_id)] == [
        "paused",
        "resolved",
        "paused",
    ]


async def test_resolution_keeps_a_hold_that_is_not_the_episodes_own(h: Harness) -> None:
    session_id, epoch = await _measured_session(h)
    interrupted = await h.control.interrupt(session_id)
    assert await h.control.report_storage(session_id, epoch, PAUSE) == "paused"
    [paused] = await _pressure(h, session_id)
    assert paused["holdId"] == interrupted.hold_id

    assert await h.control.report_storage(session_id, epoch, CLEAR) == "resolved"
    view = await h.control.get_session(session_id)
    assert view.hold is not None
    assert view.hold.reason == "interrupt"


async def test_an_interrupt_stops_a_turn_running_under_a_pause(h: Harness) -> None:
    session = await h.session()
    await h.control.set_storage_limits(session.id, LIMITS)
    epoch, running = await h.running(session.id)
    await h.control.report_storage(session.id, epoch, PAUSE)

    receipt = await h.control.interrupt(session.id)

    view = await h.control.get_session(session.id)
    assert view.hold is not None
    assert (view.hold.reason, view.hold.hold_id) == ("interrupt", receipt.hold_id)
    with pytest.raises(ReceiveTimeout):  # asking for work lets go of the Turn
        await h.control.receive(session.id, epoch, timeout=0.05)
    turn = await h.control.get_turn(session.id, running.id)
    assert (turn.status, turn.reason) == ("interrupted", "interrupt")


async def test_reports_are_fenced_and_need_thresholds(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    # No thresholds stored (no disk prepared): nothing to measure against.
    assert await h.control.report_storage(session.id, epoch, STOP) is None
    with pytest.raises(StaleEpoch):
        await h.control.report_storage(session.id, epoch + 1, STOP)
