"""What the status mirror writes to the apiserver per Turn (issue 11, item 5): API
Turns may go without resources, a Turn applied with kubectl still gets its status,
changes within one interval are one patch, and a restart does not reread history."""

from __future__ import annotations

import asyncio

from helmr.operator.disks.workspaces import Disks
from helmr.operator.mirror.custom_resources import CustomResourceMirror, turn_cr_name
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.telemetry.metrics import OperatorMetrics
from tests.unit.control.harness import Harness
from tests.unit.operator.test_status_writes import (
    KUBECTL_TURN,
    SlowKube,
    admit_kubectl_turn,
    admitted_session,
)


def without_api_turn_resources(h: Harness) -> tuple[SlowKube, CustomResourceMirror, StatusSync]:
    kube = SlowKube()
    kube.release.set()  # no apiserver slower than the runner here
    mirror = CustomResourceMirror(kube, api_turn_resources=False)
    return kube, mirror, StatusSync(h.control, mirror, OperatorMetrics(), wake=lambda changed: None)


def turn_patches(kube: SlowKube) -> list[str]:
    return [entry for entry in kube.log if entry.startswith("Turn/")]


def turn_writes(kube: SlowKube) -> list[str]:
    """Turn status patches and Kubernetes Events (each Turn's outcome is one)."""
    return [*turn_patches(kube), *(entry for entry in kube.log if entry == "event")]


async def test_api_turns_without_resources_cost_no_turn_writes(h: Harness) -> None:
    kube, mirror, sync = without_api_turn_resources(h)
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for n in range(3):
        turn = await h.control.enqueue(session.id, n)
        await mirror.turn_enqueued(session, turn)
        assert await h.control.receive(session.id, epoch, timeout=0) is not None
        await h.control.complete(session.id, epoch, turn.id)
        await sync.sync(await h.control.changed_sessions(timeout=0))

    assert turn_writes(kube) == []
    assert kube.created == {KUBECTL_TURN}  # SlowKube's own: no API Turn's was created
    assert turn_cr_name(turn.id) not in kube.created
    assert ("Session", session.name) in kube.statuses


async def test_a_kubectl_turn_gets_its_status_while_api_turns_have_none(h: Harness) -> None:
    kube, mirror, sync = without_api_turn_resources(h)
    session = await h.session()
    admitted_session(kube, session)
    epoch = await h.control.process_started(session.id)

    await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name)
    turn = await h.control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    await h.control.complete(session.id, epoch, turn.id, {"echo": "kubectl"})
    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert kube.turn_phase(KUBECTL_TURN) == "completed"
    assert turn_writes(kube).count(f"Turn/{KUBECTL_TURN}") >= 1


async def test_changes_within_an_interval_are_one_session_patch(h: Harness) -> None:
    kube = SlowKube()
    kube.release.set()
    mirror = CustomResourceMirror(kube, api_turn_resources=False)
    sync = StatusSync(h.control, mirror, OperatorMetrics(), wake=lambda changed: None, interval=30)
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    running = asyncio.create_task(sync.run())
    try:
        await asyncio.wait_for(kube.written.wait(), 5)  # the first pass: at once
        for n in range(5):
            turn = await h.control.enqueue(session.id, n)
            assert await h.control.receive(session.id, epoch, timeout=0) is not None
            await h.control.complete(session.id, epoch, turn.id)
            await asyncio.sleep(0.05)  # time enough for a pass, if one were due
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert kube.log.count(f"Session/{session.name}") == 1


async def test_each_change_is_woken_once_as_it_comes_not_again_at_the_pass(h: Harness) -> None:
    """The running mirror tells the control plane of each change as it comes (the
    supervisor and the disk keeper do not wait for its pass), and not again when the
    pass mirrors it: the disk keeper read the changed Sessions' saves at each wake."""
    kube = SlowKube()
    kube.release.set()
    mirror = CustomResourceMirror(kube, api_turn_resources=False)
    woken: list[set[str]] = []
    sync = StatusSync(
        h.control, mirror, OperatorMetrics(), wake=lambda changed: woken.append(set(changed))
    )
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    turn = await h.control.enqueue(session.id, "work")
    assert await h.control.receive(session.id, epoch, timeout=0) is not None
    running = asyncio.create_task(sync.run())
    try:
        await asyncio.wait_for(kube.written.wait(), 5)  # its first pass mirrored it
        assert woken == [{session.id}]
        await h.control.complete(session.id, epoch, turn.id)
        for _ in range(500):  # until the Turn's end is heard (a wake and its pass at once)
            if len(woken) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert woken == [{session.id}, {session.id}]  # the run, then the Turn's end


async def test_a_restarted_mirror_goes_on_where_the_last_one_stopped(h: Harness) -> None:
    kube = SlowKube()
    kube.release.set()
    first = StatusSync(
        h.control, CustomResourceMirror(kube), OperatorMetrics(), wake=lambda changed: None
    )
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    for n in range(3):
        turn = await h.control.enqueue(session.id, n)
        kube.created.add(turn_cr_name(turn.id))
        assert await h.control.receive(session.id, epoch, timeout=0) is not None
        await h.control.complete(session.id, epoch, turn.id)
    await first.sync(await h.control.changed_sessions(timeout=0))
    assert len(turn_patches(kube)) == 3

    # A new process: its mirror knows nothing of the first one's but the store.
    kube.log.clear()
    restarted = StatusSync(
        h.control, CustomResourceMirror(kube), OperatorMetrics(), wake=lambda changed: None
    )
    turn = await h.control.enqueue(session.id, "after")
    kube.created.add(turn_cr_name(turn.id))
    assert await h.control.receive(session.id, epoch, timeout=0) is not None
    await h.control.complete(session.id, epoch, turn.id)
    await restarted.sync(await h.control.changed_sessions(timeout=0))

    assert turn_patches(kube) == [f"Turn/{turn_cr_name(turn.id)}"]


async def test_a_workspace_status_is_written_again_only_when_it_changes(h: Harness) -> None:
    kube = SlowKube()
    disks = Disks(h.control, kube, OperatorMetrics())
    session = await h.session()
    for _ in range(3):  # the status sync asks after each change of its Session
        await disks.sync_status(session.namespace, session.workspace)
    assert kube.log.count(f"Workspace/{session.workspace}") == 1

    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id)  # a save is pending
    await disks.sync_status(session.namespace, session.workspace)
    assert kube.log.count(f"Workspace/{session.workspace}") == 2
