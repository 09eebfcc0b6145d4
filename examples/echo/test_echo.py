"""The echo actor's tests, on a dev plane (``helmr.testing``): its runner is a real
``python -m helmr.runner`` process under the real control plane, without a cluster."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from helmr.testing import Plane, StartPlane

ECHO = str(Path(__file__).parent)
LONG = " ".join(f"word{i}" for i in range(400))
"""An input the echo actor takes 20 s to stream back (a pause per word)."""


@pytest.fixture
def helmr_actor() -> str:
    return ECHO


async def test_a_turn_echoes_its_input(helmr_plane: Plane) -> None:
    session = await helmr_plane.session()

    turn = await session.run("hello world")

    assert turn.status == "completed"
    assert turn.result == {"echo": "hello world"}
    assert turn.response == "echo: hello world"
    kinds = [e.kind for e in await session.events()]
    assert "turn.running" in kinds
    assert "turn.output" in kinds


async def test_a_message_to_the_running_turn_is_echoed_and_one_is_rejected(
    helmr_plane: Plane,
) -> None:
    session = await helmr_plane.session()
    pending = await session.enqueue(LONG)
    await session.running(pending)

    sent = await session.send({"note": "steer"})
    refused = await session.send({"reject": "not now"})

    assert sent.kind == "messaged"
    await session.wait_for("message.delivered")
    rejected = await session.wait_for("message.rejected")
    assert refused.message is not None
    assert rejected.data == {"messageId": refused.message.id, "reason": "not now"}
    outputs = [e.data for e in await session.events() if e.kind == "turn.output"]
    assert any("steer" in str(data) for data in outputs)


async def test_an_interrupt_holds_the_session_until_it_is_resumed(helmr_plane: Plane) -> None:
    session = await helmr_plane.session()
    await session.running(await session.enqueue(LONG))

    await session.interrupt()
    held = await session.until(lambda s: s.hold is not None and s.hold.converged)
    queued = await session.enqueue("after")
    await session.resume()

    assert held.hold is not None
    assert held.hold.reason == "interrupt"
    assert (await session.ended(queued)).status == "completed"
    interrupted = await session.wait_for("turn.interrupted")
    assert interrupted.data == {"reason": "interrupt"} or "interrupt" in str(interrupted.data)


async def test_cancel_stops_the_running_turn_and_close_drains_the_queue(
    helmr_plane: Plane,
) -> None:
    cancelled = await helmr_plane.session()
    running = await cancelled.enqueue(LONG)
    await cancelled.running(running)
    await cancelled.cancel()
    stopped = await cancelled.ended(running)
    assert (stopped.status, stopped.reason) == ("interrupted", "cancel")
    assert (await cancelled.until(lambda s: s.status == "closed")).closed_how == "cancel"

    closed = await helmr_plane.session()
    last = await closed.enqueue("last")
    await closed.close()
    assert (await closed.ended(last)).status == "completed"
    assert (await closed.until(lambda s: s.status == "closed")).closed_how == "close"


async def test_a_lost_runner_interrupts_its_turn_and_the_next_turn_runs_on_a_new_one(
    helmr_plane: Plane,
) -> None:
    session = await helmr_plane.session()
    lost = await session.enqueue(LONG)
    await session.running(lost)

    session.lose_execution()

    assert (await session.ended(lost)).reason == "computer_execution_lost"
    await session.wait_for("session.execution_lost")
    after = await session.run("again")
    assert after.status == "completed"
    assert (await session.retrieve()).process_epoch == 2


async def test_a_turn_past_max_turn_duration_is_interrupted(helmr_dev: StartPlane) -> None:
    plane = await helmr_dev(ECHO, spec={"maxTurnDurationSeconds": 1})
    session = await plane.session()

    turn = await session.run(LONG)
    after = await session.run("next")

    assert (turn.status, turn.reason) == ("interrupted", "turn_deadline_elapsed")
    assert after.status == "completed"


async def test_a_full_computer_holds_the_session_for_storage_pressure(
    helmr_dev: StartPlane,
) -> None:
    computer = {"size": "8Mi", "usageIntervalSeconds": 1}
    plane = await helmr_dev(ECHO, spec={"computer": computer})
    session = await plane.session()
    await session.run("first")

    await session.fill_computer(0.95)
    held = await session.until(lambda s: s.hold is not None)
    await session.free_computer()
    released = await session.until(lambda s: s.hold is None)

    assert held.hold is not None
    assert held.hold.reason == "storage_pressure"
    assert released.hold is None
    assert await session.wait_for("session.storage_pressure")


async def test_stop_grace_is_shortened_for_a_test(helmr_dev: StartPlane) -> None:
    plane = await helmr_dev(ECHO, stop_grace=timedelta(seconds=1))
    session = await plane.session()
    assert (await session.run("quick")).status == "completed"
