"""The supervisor's cold-start path makes no apiserver call it can do without
(issue 11, item 6): a Session that never started a process has no pods to look
for, and a namespace's runner service account is made once per process, and
made again if a pod is refused because it went missing."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from helmr.kube.client import PodRef
from helmr.kube.errors import translated
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import ClusterKube


class CountingKube(ClusterKube):
    """Counts the pod listings; ``account_missing`` refuses pods until the runner
    service account is made again (as the apiserver does once it is deleted)."""

    def __init__(self) -> None:
        super().__init__()
        self.listings = 0
        self.account_missing = False

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        self.listings += 1
        return []

    async def ensure_service_account(self, namespace: str, body: dict[str, Any]) -> None:
        self.account_missing = False
        await super().ensure_service_account(namespace, body)

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        if self.account_missing:
            self.refused.append("pod")
            raise translated(ApiException(status=403, reason="Forbidden: serviceaccount not found"))
        return await super().create_pod(namespace, body)


def supervisor(h: Harness, kube: CountingKube) -> Supervisor:
    return Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())


async def started(h: Harness, sup: Supervisor) -> str:
    """A new Session given a Turn, after a supervisor pass: its id."""
    session = await h.session()
    await h.control.enqueue(session.id, "go")
    await sup.reconcile()
    assert (await h.control.get_session(session.id)).process_live
    return session.id


async def test_a_session_that_never_started_a_process_lists_no_pods(h: Harness) -> None:
    kube = CountingKube()

    await started(h, supervisor(h, kube))

    assert kube.listings == 0


async def test_the_runner_service_account_is_made_once_per_namespace(h: Harness) -> None:
    kube = CountingKube()
    sup = supervisor(h, kube)

    await started(h, sup)
    await started(h, sup)

    assert kube.created.count("team/serviceaccount") == 1
    assert kube.created.count("team/pod") == 2


async def test_a_pod_refused_for_a_deleted_account_makes_it_again_and_starts(
    h: Harness,
) -> None:
    kube = CountingKube()
    sup = supervisor(h, kube)
    await started(h, sup)

    kube.account_missing = True  # deleted behind the operator's back
    session_id = await started(h, sup)

    assert kube.refused == ["pod"]
    assert kube.created.count("team/serviceaccount") == 2
    assert kube.created.count("team/pod") == 2
    assert (await h.control.get_session(session_id)).consecutive_failures == 0
