"""The operator's passes over a real store, against a stub of its thin Kube wrapper:
the status sync mirrors each object on its own, and the supervisor deletes an
overrunning process's pod once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from helmr.operator.mirror.custom_resources import CustomResourceMirror, turn_cr_name
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import TurnStatus
from helmr.states import ERROR_MESSAGE_MAX, ErrorInfo
from tests.compose import Clock
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube


@pytest.fixture
def clock() -> Clock:
    # The supervisor compares deadlines with the wall clock: start an hour ago.
    clock = Clock()
    clock.now = datetime.now(UTC) - timedelta(hours=1)
    return clock


def status_sync(h: Harness, kube: StubKube) -> StatusSync:
    return StatusSync(
        h.control,
        CustomResourceMirror(kube),
        OperatorMetrics(),
        wake=lambda changed: kube.log.append("wake"),
    )


async def test_a_long_failure_is_mirrored_bounded_and_other_sessions_keep_mirroring(
    h: Harness,
) -> None:
    kube = StubKube()
    sync = status_sync(h, kube)
    broken = await h.session()
    await h.control.enqueue(broken.id, "waits")
    failed = await h.session()
    other = await h.session()
    epoch, turn = await h.running(failed.id)
    await h.control.fail(failed.id, epoch, turn.id, ErrorInfo(code="boom", message="x" * 40_000))
    other_epoch, first = await h.running(other.id, "first")
    await h.control.enqueue(other.id, "second")
    await h.control.complete(other.id, other_epoch, first.id)
    second = await h.control.receive(other.id, other_epoch, timeout=0)
    assert second is not None
    kube.failing = {broken.name, turn_cr_name(first.id)}

    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert kube.log[0] == "wake"  # the supervisor hears of changes before the mirroring
    assert ("Session", broken.name) not in kube.statuses
    assert ("Session", failed.name) in kube.statuses
    assert ("Session", other.name) in kube.statuses
    mirrored = kube.statuses[("Turn", turn_cr_name(turn.id))]
    assert isinstance(mirrored, TurnStatus)
    assert mirrored.phase == "failed"
    assert mirrored.error is not None
    assert len(mirrored.error.message) <= ERROR_MESSAGE_MAX
    assert mirrored.error.message.endswith("more characters]")
    # One Turn's failing patch does not stop its Session's other Turns.
    assert ("Turn", turn_cr_name(second.id)) in kube.statuses

    # What failed is mirrored on a later pass, with nothing new in the store.
    kube.failing = set()
    await sync.sync(set())
    assert ("Session", broken.name) in kube.statuses
    assert ("Turn", turn_cr_name(first.id)) in kube.statuses


async def test_an_overrunning_process_is_stopped_once_per_pass(h: Harness) -> None:
    kube = StubKube()
    session = await h.session(max_turn_duration=timedelta(seconds=1))
    epoch, _ = await h.running(session.id)
    supervisor = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())

    await supervisor.reconcile()  # its deadline passed an hour ago

    # expire_deadlines and processes_to_stop both name it; its pod is deleted once.
    assert kube.deleted_pods == [f"{session.name}-runner-{epoch}"]
    assert [stop.epoch for stop in await h.control.processes_to_stop()] == [epoch]
