"""Runner processes as Kubernetes pods (:class:`~helmr.operator.runners.backend.RunnerBackend`):
one pod per process epoch, found again by its labels after a restart, and the
namespace's runner service account and the Actor's NetworkPolicies made before
the first pod."""

from __future__ import annotations

from typing import Any

from helmr.kube.client import Kube, PodRef, namespace_terminating
from helmr.kube.errors import KubeError
from helmr.kube.labels import LABEL_COMPONENT, LABEL_EPOCH, LABEL_SESSION_ID, RUNNER
from helmr.operator.runners import pods
from helmr.operator.runners.backend import RunnerRef, RunnerState, StartRefused
from helmr.operator.runners.disk_gates import DiskGates
from helmr.operator.runners.network_policies import RunnerPolicies
from helmr.operator.runners.preparation import container_started, pending_detail


class PodRunners:
    def __init__(
        self, kube: Kube, gates: DiskGates, policies: RunnerPolicies | None = None
    ) -> None:
        """``gates``: ungate each pod made before its claim was bound; ``policies``: the
        NetworkPolicies put in place before each pod (none: the pods are left to
        whatever policies the cluster has)."""
        self.kube = kube
        self.gates = gates
        self.policies = policies
        # Namespaces whose runner service account this process has made sure of.
        self._accounts: set[str] = set()

    def name(self, session_name: str, epoch: int) -> str:
        return pods.pod_name(session_name, epoch)

    async def runners(
        self, namespace: str | None, session_id: str | None = None
    ) -> list[RunnerRef]:
        selector = (
            f"{LABEL_COMPONENT}={RUNNER}"
            if session_id is None
            else f"{LABEL_SESSION_ID}={session_id}"
        )
        return [_ref(pod) for pod in await self.kube.list_pods(namespace, selector)]

    async def state(self, namespace: str, name: str) -> RunnerState:
        pod = await self.kube.get_pod(namespace, name)
        started = pod is not None and container_started(pod)
        return RunnerState(gone=pod is None, started=started, pending=pending_detail(pod))

    async def start(self, spec: pods.RunnerSpec) -> str:
        if self.policies is not None:
            # Never a runner pod before its policies: agent code is contained from its start.
            try:
                await self.policies.ensure(spec.actor)
            except KubeError as exc:
                raise StartRefused(
                    f"runner pod's NetworkPolicies not written: {exc.status} {exc.reason}:"
                    f" {exc.body}",
                    gone=namespace_terminating(exc),
                ) from exc
        body = pods.build_runner_pod_spec(spec)
        try:
            uid = await self._create(spec.namespace, body)
        except KubeError as exc:
            raise StartRefused(
                f"runner pod not created: {exc.status} {exc.reason}: {exc.body}",
                gone=namespace_terminating(exc),
            ) from exc
        if not spec.disk_bound:
            self.gates.follow(spec.namespace, body["metadata"]["name"], spec.claim_name)
        return uid

    async def remove(self, namespace: str, name: str) -> None:
        await self.kube.delete_pod(namespace, name)

    async def _create(self, namespace: str, body: dict[str, Any]) -> str:
        """Creates the pod, and first the namespace's runner service account unless
        this process made sure of it already (one apiserver call fewer per cold
        start). If the pod is refused, the account may have been deleted since: it
        is made again and the pod created once more; a refusal of that is final."""
        if namespace in self._accounts:
            try:
                return await self.kube.create_pod(namespace, body)
            except KubeError:
                self._accounts.discard(namespace)
        account = pods.build_service_account_spec(namespace)
        await self.kube.ensure_service_account(namespace, account)
        self._accounts.add(namespace)
        return await self.kube.create_pod(namespace, body)


def _ref(pod: PodRef) -> RunnerRef:
    return RunnerRef(
        namespace=pod.namespace,
        name=pod.name,
        session_id=pod.labels.get(LABEL_SESSION_ID, ""),
        epoch=int(pod.labels.get(LABEL_EPOCH, "0")),
        deleting=pod.deleting,
    )
