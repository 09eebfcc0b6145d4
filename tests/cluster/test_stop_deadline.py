"""Interrupted work that does not stop: the stop grace period, with real runner pods.

After an interrupt is accepted for a running Turn, its runner process has the
stop grace period (``HELMR_STOP_GRACE_SECONDS``, 3 s for the test operator) to
let go of it; the Turn stays ``running`` until then. The misbehaving echo's
``{"sleep": s}`` (``tests/actors/misbehaving.py``) ignores its signal and
cancellation, so it never does: the operator then stops the process, the Turn
converges (``interrupted``) once the pod has ended, and that end is a counted
process failure with reason ``stop_deadline_elapsed`` (spec/000 "After a
failure", spec/002 ``session.process_failed``). Either interrupt holds the
Session: the next Turn runs on a new process after ``resume``.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from helmr.client import Event, SessionRef, TurnRef
from helmr.errors import HoldNotConverged

from .sessions import all_events, eventually, runner_pods

GRACE = timedelta(seconds=3)
"""``HELMR_STOP_GRACE_SECONDS`` of the test operator (conftest)."""


@pytest.fixture
def session(misbehaving_session: SessionRef) -> SessionRef:
    return misbehaving_session


def of_kind(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.kind == kind]


def data(event: Event) -> dict[str, Any]:
    assert isinstance(event.data, dict)
    return event.data


async def stuck_turn(session: SessionRef) -> tuple[TurnRef, TurnRef, int]:
    """A running Turn whose handler ignores interruption, with a Turn queued behind it;
    returns both and the epoch of the process running the first."""
    stuck = await session.enqueue({"sleep": 120})
    queued = await session.enqueue("after the stuck turn")

    async def running() -> int | None:
        turn = await stuck.retrieve()
        return turn.epoch if turn.status == "running" else None

    epoch: int = await eventually(running, what=f"{stuck.id} to run")
    return stuck, queued, epoch


async def process_failed(session: SessionRef) -> Event | None:
    """The Session's ``session.process_failed`` event once its process is gone."""
    if (await session.retrieve()).process_live:
        return None
    failed = of_kind(await all_events(session), "session.process_failed")
    return failed[0] if failed else None


async def test_a_session_interrupt_of_a_turn_that_ignores_it_stops_the_process_after_the_grace(
    session: SessionRef,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    stuck, queued, epoch = await stuck_turn(session)

    receipt = await session.interrupt()

    # 001: "Acceptance may precede physical convergence": the Turn keeps running
    # while its process, still busy, has not let go of it, and resume is refused.
    assert (await stuck.retrieve()).status == "running"
    state = await session.retrieve()
    assert (state.process_live, state.process_epoch) == (True, epoch)
    assert state.hold is not None
    assert state.hold.converged is False
    with pytest.raises(HoldNotConverged):
        await session.resume(hold_id=receipt.hold_id)

    failure = await eventually(partial(process_failed, session), what="the process to stop")
    interrupted = await stuck.retrieve()
    assert (interrupted.status, interrupted.reason) == ("interrupted", "interrupt")
    [ended] = of_kind(await all_events(session), "turn.interrupted")
    assert ended.sequence < failure.sequence

    assert data(failure) == {
        "processEpoch": epoch,
        "reason": "stop_deadline_elapsed",
        "holdId": None,
    }
    assert failure.created_at - receipt.accepted_at >= GRACE
    state = await session.retrieve()
    assert state.consecutive_failures == 1
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (receipt.hold_id, "interrupt")
    events = await all_events(session)
    assert not of_kind(events, "session.execution_lost")
    assert not of_kind(events, "session.process_stopped")
    # Still held by the interrupt: nothing runs the queued Turn, no pod starts.
    assert (await queued.retrieve()).status == "queued"
    await eventually(lambda: not runner_pods(core, namespace), what="the runner pod to go")
    assert (await session.retrieve()).process_epoch == epoch

    await session.resume(hold_id=receipt.hold_id)

    done = await queued.wait(timeout=90)
    assert done.status == "completed"
    assert done.epoch == epoch + 1
    after = await stuck.retrieve()
    assert (after.status, after.reason, after.epoch) == ("interrupted", "interrupt", epoch)
    assert (await session.retrieve()).consecutive_failures == 0  # a completed Turn resets it


async def test_an_exact_turn_interrupt_of_a_turn_that_ignores_it_runs_the_next_on_a_new_process(
    session: SessionRef,
) -> None:
    stuck, following, epoch = await stuck_turn(session)

    receipt = await stuck.interrupt()

    assert (await stuck.retrieve()).status == "running"  # accepted, not converged
    failure = await eventually(partial(process_failed, session), what="the process to stop")
    assert data(failure) == {
        "processEpoch": epoch,
        "reason": "stop_deadline_elapsed",
        "holdId": None,
    }
    assert failure.created_at - receipt.accepted_at >= GRACE
    interrupted = await stuck.retrieve()
    assert (interrupted.status, interrupted.reason) == ("interrupted", "interrupt")
    # The exact-Turn interrupt holds the Session like a Session interrupt.
    state = await session.retrieve()
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.converged) == (receipt.hold_id, True)
    assert (await following.retrieve()).status == "queued"

    await session.resume(hold_id=receipt.hold_id)

    done = await following.wait(timeout=90)
    assert done.status == "completed"
    assert done.epoch == epoch + 1
    events = await all_events(session)
    assert [data(e) for e in of_kind(events, "session.resume")] == [
        {"holdId": receipt.hold_id, "how": "resume"}
    ]
