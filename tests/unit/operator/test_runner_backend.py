"""The supervisor runs processes through a RunnerBackend, on disks a DiskBackend
keeps: backends that are no pod and no claim at all (as ``helmr dev``'s local
processes and directories will be) are started, stopped and followed by the same
passes, and no runner pod or claim is made."""

from __future__ import annotations

from helmr.control import SessionView
from helmr.operator.disks.manifests import DiskUsageSpec, PreparedDisk, disk_usage_spec
from helmr.operator.runners.backend import RunnerRef, RunnerState, StartRefused
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.pods import RunnerSpec
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Actor
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import ClusterKube


class LocalRunners:
    """Runners kept in a dict, as a backend of local processes would keep them."""

    def __init__(self, refuse: bool = False) -> None:
        self.running: dict[tuple[str, str], RunnerRef] = {}
        self.refuse = refuse

    def name(self, session_name: str, epoch: int) -> str:
        return f"{session_name}-local-{epoch}"

    async def runners(
        self, namespace: str | None, session_id: str | None = None
    ) -> list[RunnerRef]:
        return [
            runner
            for runner in self.running.values()
            if namespace in (None, runner.namespace) and session_id in (None, runner.session_id)
        ]

    async def state(self, namespace: str, name: str) -> RunnerState:
        gone = (namespace, name) not in self.running
        return RunnerState(gone=gone, started=not gone, pending="")

    async def start(self, spec: RunnerSpec) -> str:
        if self.refuse:
            raise StartRefused("no room for another process", gone=False)
        name = self.name(spec.session_name, spec.epoch)
        self.running[(spec.namespace, name)] = RunnerRef(
            spec.namespace, name, spec.session_id, spec.epoch, deleting=False
        )
        return f"uid-{name}"

    async def remove(self, namespace: str, name: str) -> None:
        self.running.pop((namespace, name), None)


class LocalDisks:
    """A directory per Workspace, as a backend of local disks would keep them."""

    def __init__(self) -> None:
        self.prepared: list[str] = []

    async def prepare(self, session: SessionView, actor: Actor) -> PreparedDisk:
        self.prepared.append(session.workspace)
        usage: DiskUsageSpec = disk_usage_spec(actor.spec.computer)
        return PreparedDisk(claim=f"/tmp/{session.workspace}", usage=usage)

    async def reconcile(self) -> None:
        return None

    async def why_unsaved(self, session: SessionView) -> str | None:
        return None


async def test_backends_of_their_own_start_and_stop_the_process(h: Harness) -> None:
    kube, runners, disks = ClusterKube(), LocalRunners(), LocalDisks()
    supervisor = Supervisor(
        h.control, kube, RunnerPods(), Settings(), OperatorMetrics(), runners=runners, disks=disks
    )
    session = await h.session()
    await h.control.enqueue(session.id, "go")

    await supervisor.reconcile()

    live = await h.control.get_session(session.id)
    assert live.process_live
    assert [r.epoch for r in runners.running.values()] == [live.process_epoch]
    assert "team/pod" not in kube.created
    assert disks.prepared == [session.workspace]
    assert not [made for made in kube.created if "claim" in made]
    await h.control.cancel(session.id)
    await supervisor.reconcile()
    assert runners.running == {}


async def test_a_start_the_backend_refuses_fails_the_preparation(h: Harness) -> None:
    supervisor = Supervisor(
        h.control,
        ClusterKube(),
        RunnerPods(),
        Settings(),
        OperatorMetrics(),
        runners=LocalRunners(refuse=True),
    )
    session = await h.session()
    await h.control.enqueue(session.id, "go")

    await supervisor.reconcile()

    after = await h.control.get_session(session.id)
    assert not after.process_live
    assert after.process_epoch == 1
