"""The stop grace period: a process must let go of a Turn interrupted on it in time.

After an interrupt is accepted for a running Turn, its process has
``ControlConfig.stop_grace`` to let go of it: its next ``receive``, or its
end (only then is the Turn ``interrupted``). Otherwise ``expire_deadlines`` asks for it to stop
(``stop_deadline_elapsed``) and its end is a counted process failure (spec/000
"After a failure"; spec/002 ``session.process_failed``), so the next Turn
runs on a new process.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from helmr.control import ControlConfig
from helmr.errors import ReceiveTimeout
from helmr.events import Event, EventKind
from tests.compose import Clock
from tests.unit.control.harness import Harness

GRACE = timedelta(seconds=10)


@pytest.fixture
def control_config() -> ControlConfig:
    return ControlConfig(stop_grace=GRACE)


def process_ends(events: list[Event]) -> list[tuple[str, object]]:
    ends = (EventKind.SESSION_PROCESS_FAILED, EventKind.SESSION_PROCESS_STOPPED)
    return [(e.kind.value, e.data) for e in events if e.kind in ends]


async def test_a_session_interrupted_turn_not_let_go_of_stops_its_process_as_a_failure(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")

    receipt = await h.control.interrupt(session.id)

    # The Turn keeps running; its process gets the grace period to let go of it.
    assert (await h.control.get_turn(session.id, turn.id)).status == "running"
    assert await h.control.next_deadline() == h.clock.now + GRACE
    assert await h.control.expire_deadlines(h.clock.now + GRACE - timedelta(seconds=1)) == []
    assert await h.control.processes_to_stop() == []

    stops = await h.control.expire_deadlines(h.clock.advance(GRACE))

    assert [(s.session_id, s.epoch, s.reason) for s in stops] == [
        (session.id, epoch, "stop_deadline_elapsed")
    ]
    assert await h.control.processes_to_stop() == stops
    assert await h.control.next_deadline() is None
    assert await h.control.expire_deadlines(h.clock.advance(GRACE)) == []
    # Letting go now is too late: the process gets no more Turns.
    assert await h.control.receive(session.id, epoch, timeout=0) is None
    interrupted = await h.control.get_turn(session.id, turn.id)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "interrupt")

    # The operator deletes the pod; however its end is seen, it is a failure.
    outcome = await h.control.execution_lost(session.id, epoch)

    assert (outcome.outcome, outcome.hold_id) == ("failed", None)
    assert process_ends(await h.events(session.id)) == [
        (
            "session.process_failed",
            {"processEpoch": epoch, "reason": "stop_deadline_elapsed", "holdId": None},
        )
    ]
    assert not [e for e in await h.events(session.id) if e.kind == "session.execution_lost"]
    state = await h.control.get_session(session.id)
    assert (state.consecutive_failures, state.process_live) == (1, False)
    assert state.hold is not None
    assert state.hold.hold_id == receipt.hold_id
    # Still held by the interrupt: the queued Turn waits for resume, then a new process.
    assert await h.control.sessions_needing_runner(h.clock()) == []
    await h.control.resume(session.id, receipt.hold_id)
    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert (nxt.id, nxt.epoch) == (queued.id, new_epoch)
    await h.control.complete(session.id, new_epoch, nxt.id)
    assert (await h.control.get_session(session.id)).consecutive_failures == 0


async def test_an_exact_turn_interrupt_not_let_go_of_runs_the_next_turn_on_a_new_process(
    h: Harness,
) -> None:
    """The Turn converges when its stopped process ends, and stays held until resumed."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    queued = await h.control.enqueue(session.id, "next")
    receipt = await h.control.interrupt(session.id, turn.id)

    stops = await h.control.expire_deadlines(h.clock.advance(GRACE))
    assert [s.reason for s in stops] == ["stop_deadline_elapsed"]
    # The pod ended with an exit code before its deletion was seen: a failure too.
    outcome = await h.control.process_exited(session.id, epoch, 137)

    assert outcome.outcome == "failed"
    events = await h.events(session.id)
    assert [(e.kind.value, e.data) for e in events[-2:]] == [
        ("turn.interrupted", {"reason": "interrupt", "holdId": receipt.hold_id}),
        (
            "session.process_failed",
            {"processEpoch": epoch, "reason": "stop_deadline_elapsed", "holdId": None},
        ),
    ]
    state = await h.control.get_session(session.id)
    assert state.consecutive_failures == 1
    assert state.hold is not None
    assert state.hold.hold_id == receipt.hold_id
    await h.control.resume(session.id, receipt.hold_id)
    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]
    new_epoch = await h.control.process_started(session.id)
    nxt = await h.control.receive(session.id, new_epoch, timeout=0)
    assert nxt is not None
    assert (nxt.id, nxt.epoch) == (queued.id, new_epoch)


async def test_a_process_that_asks_for_its_next_turn_in_time_is_not_stopped(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    await h.control.interrupt(session.id, turn.id)

    with pytest.raises(ReceiveTimeout):  # held until resumed, but it has let go
        await h.control.receive(session.id, epoch, timeout=0)

    assert (await h.control.get_turn(session.id, turn.id)).status == "interrupted"
    assert await h.control.next_deadline() is None
    assert await h.control.expire_deadlines(h.clock.advance(GRACE * 2)) == []
    assert (await h.control.get_session(session.id)).consecutive_failures == 0


async def test_a_held_process_that_asks_for_work_in_time_has_let_go(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    receipt = await h.control.interrupt(session.id)

    with pytest.raises(ReceiveTimeout):  # held: no Turn, but the process asked
        await h.control.receive(session.id, epoch, timeout=0)

    assert await h.control.expire_deadlines(h.clock.advance(GRACE * 2)) == []
    # Resumed, the same process takes the queued Turn.
    await h.control.resume(session.id, receipt.hold_id)
    nxt = await h.control.receive(session.id, epoch, timeout=0)
    assert nxt is not None
    assert nxt.epoch == epoch


async def test_a_process_that_ends_in_time_is_only_a_stop(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.interrupt(session.id, turn.id)

    outcome = await h.control.process_exited(session.id, epoch, 0)

    assert outcome.outcome == "stopped"
    assert await h.control.next_deadline() is None
    assert await h.control.expire_deadlines(h.clock.advance(GRACE * 2)) == []
    assert process_ends(await h.events(session.id)) == [
        ("session.process_stopped", {"processEpoch": epoch, "reason": "exited"})
    ]


async def test_an_earlier_stop_deadline_stands(h: Harness) -> None:
    session = await h.session()
    _, turn = await h.running(session.id)
    await h.control.interrupt(session.id, turn.id)
    first = h.clock.now + GRACE
    h.clock.advance(GRACE / 2)
    await h.control.interrupt(session.id)  # a Session interrupt supersedes the Turn hold
    assert await h.control.next_deadline() == first


async def test_a_turn_deadline_comes_first_when_it_is_earlier(h: Harness) -> None:
    interrupted = await h.session()
    _, turn = await h.running(interrupted.id)
    await h.control.interrupt(interrupted.id, turn.id)
    limited = await h.session(max_turn_duration=timedelta(seconds=5))
    await h.running(limited.id)
    assert await h.control.next_deadline() == h.clock.now + timedelta(seconds=5)
    stops = await h.control.expire_deadlines(h.clock.advance(GRACE))
    assert sorted((s.session_id, s.reason) for s in stops) == sorted(
        [(limited.id, "turn_deadline_elapsed"), (interrupted.id, "stop_deadline_elapsed")]
    )


async def test_cancel_stops_the_process_at_once_and_that_is_not_a_failure(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)

    await h.control.cancel(session.id)

    assert [s.reason for s in await h.control.processes_to_stop()] == ["cancel"]
    assert await h.control.expire_deadlines(h.clock.advance(GRACE * 2)) == []
    assert [s.reason for s in await h.control.processes_to_stop()] == ["cancel"]
    outcome = await h.control.execution_lost(session.id, epoch)
    assert (outcome.outcome, outcome.session_status) == ("stopped", "closed")
    assert (await h.control.get_session(session.id)).consecutive_failures == 0


async def test_a_close_during_the_grace_period_is_a_requested_stop(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.interrupt(session.id, turn.id)
    await h.control.close(session.id)  # nothing queued: the process is asked to stop
    assert await h.control.expire_deadlines(h.clock.advance(GRACE)) == []
    outcome = await h.control.execution_lost(session.id, epoch)
    assert (outcome.outcome, outcome.session_status) == ("stopped", "closed")


async def test_the_stop_deadline_survives_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "helmr.db"
    config = ControlConfig(stop_grace=GRACE)
    async with Harness.open(path, clock=clock, config=config) as before:
        session = await before.session()
        epoch, turn = await before.running(session.id)
        await before.control.interrupt(session.id, turn.id)
    clock.advance(GRACE)
    async with Harness.open(path, clock=clock, config=config) as after:
        assert await after.control.next_deadline() == clock.now
        stops = await after.control.expire_deadlines(clock.now)
        assert [(s.session_id, s.epoch) for s in stops] == [(session.id, epoch)]
    async with Harness.open(path, clock=clock, config=config) as again:
        # The stop asked for is remembered, and so is what its end will mean.
        assert [s.reason for s in await again.control.processes_to_stop()] == [
            "stop_deadline_elapsed"
        ]
        assert (await again.control.execution_lost(session.id, epoch)).outcome == "failed"


async def test_forced_stops_count_toward_the_failure_hold(h: Harness) -> None:
    """Each forced stop counts; the Session, held by each interrupt anyway, is held
    for its failures by the next one once the interrupt is resumed."""
    session = await h.session()
    for n in range(1, 4):
        epoch, turn = await h.running(session.id)
        receipt = await h.control.interrupt(session.id, turn.id)
        await h.control.expire_deadlines(h.clock.advance(GRACE))
        outcome = await h.control.execution_lost(session.id, epoch)
        assert (outcome.outcome, outcome.hold_id) == ("failed", None)
        assert (await h.control.get_session(session.id)).consecutive_failures == n
        await h.control.resume(session.id, receipt.hold_id)
    epoch, _ = await h.running(session.id)
    outcome = await h.control.process_exited(session.id, epoch, 1)
    state = await h.control.get_session(session.id)
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (outcome.hold_id, "process_failures")
