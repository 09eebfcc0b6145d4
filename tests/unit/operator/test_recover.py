"""After a restart the supervisor finds out what became of the runner pods while no
operator watched: a live process's pod that is gone was lost; one being deleted
is followed until it is gone, whether or not kopf's watch ever reports it."""

from __future__ import annotations

from typing import Any

from helmr.control import SessionView
from helmr.control.adoptions import PooledPod
from helmr.kube.client import PodRef
from helmr.kube.labels import LABEL_EPOCH, LABEL_SESSION_ID
from helmr.operator.runners import pods
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from tests.unit.control.harness import Harness
from tests.unit.control.pooled import DISK
from tests.unit.operator.stub_kube import StubKube, any_resource


class RestartedKube(StubKube):
    """The runner pods the apiserver has: listed, and read one by one."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, PodRef] = {}

    def add(self, session: SessionView, epoch: int, *, deleting: bool) -> None:
        name = pods.pod_name(session.name, epoch)
        labels = {LABEL_SESSION_ID: session.id, LABEL_EPOCH: str(epoch)}
        self.pods[name] = PodRef(session.namespace, name, labels, deleting)

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        return list(self.pods.values())

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name}} if name in self.pods else None


def supervisor(h: Harness, kube: RestartedKube) -> Supervisor:
    return Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())


async def live(h: Harness) -> set[tuple[str, int]]:
    return {(s.id, s.process_epoch) for s in await h.control.live_processes()}


async def test_a_process_whose_pod_is_gone_was_lost(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)
    assert await live(h) == {(session.id, epoch)}

    await supervisor(h, RestartedKube()).recover()

    assert await live(h) == set()
    assert "session.execution_lost" in await h.kinds(session.id)


async def test_a_pod_being_deleted_at_the_restart_is_followed_until_it_is_gone(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    kube = RestartedKube()
    kube.add(session, epoch, deleting=True)
    plane = supervisor(h, kube)

    await plane.recover()
    await plane.reconcile()
    assert await live(h) == {(session.id, epoch)}  # its pod is still there

    # Gone, with no watch event to say so: the next pass reports the loss.
    del kube.pods[pods.pod_name(session.name, epoch)]
    await plane.reconcile()
    assert await live(h) == set()
    kinds = await h.kinds(session.id)
    assert kinds.count("session.execution_lost") == 1
    interrupted = await h.control.get_turn(session.id, turn.id)
    assert interrupted.status == "interrupted"

    await plane.reconcile()  # followed no more: reported once
    assert (await h.kinds(session.id)).count("session.execution_lost") == 1


class NoSnapshotsKube(RestartedKube):
    """A cluster that serves no VolumeSnapshot API, whose Actors and Workspaces exist."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshot_classes = None

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return any_resource(kind, namespace, name)


async def test_a_loss_where_the_cluster_cannot_save_says_so(h: Harness) -> None:
    session = await h.session()
    await h.running(session.id)

    await supervisor(h, NoSnapshotsKube()).recover()

    [lost] = [e.data for e in await h.events(session.id) if e.kind == "session.execution_lost"]
    assert isinstance(lost, dict)
    why = lost["savesUnavailable"]
    assert isinstance(why, str)
    assert why.startswith("the cluster serves no VolumeSnapshot API")
    assert lost["computerVersion"] is None


async def test_an_adopted_pod_a_crash_left_unlabelled_is_followed_not_lost(h: Harness) -> None:
    """Adopted in the store, its labels not yet written (warm pools write them after the
    commit): found by the adoption's name, it is no loss while it is there, and its
    end is reported once it is gone."""
    session = await h.session()
    pooled = PooledPod(namespace="team", name="reviewer-pool-1", uid="uid-1", claim="c")
    assert await h.control.adopt(session.id, 1, pooled, DISK)
    kube = RestartedKube()
    kube.pods[pooled.name] = PodRef("team", pooled.name, {}, False)
    plane = supervisor(h, kube)

    await plane.recover()
    await plane.reconcile()
    assert await live(h) == {(session.id, 1)}

    del kube.pods[pooled.name]
    await plane.reconcile()
    assert await live(h) == set()
    assert (await h.kinds(session.id)).count("session.execution_lost") == 1
