"""Small builders and waits for pods in cluster tests (restricted Pod Security)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

PYTHON_IMAGE = "helmr.local/python:3.11"


def restricted_container(
    name: str, command: list[str], *, image: str = PYTHON_IMAGE, memory_limit: str = "64Mi"
) -> client.V1Container:
    """A container that meets the `restricted` Pod Security Standard."""
    return client.V1Container(
        name=name,
        image=image,
        image_pull_policy="Never",
        command=command,
        resources=client.V1ResourceRequirements(
            requests={"cpu": "10m", "memory": "16Mi"}, limits={"memory": memory_limit}
        ),
        security_context=client.V1SecurityContext(
            allow_privilege_escalation=False,
            run_as_non_root=True,
            run_as_user=65532,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )


def python_pod(
    name: str, code: str, *, labels: dict[str, str] | None = None, memory_limit: str = "64Mi"
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            termination_grace_period_seconds=1,
            containers=[
                restricted_container(name, ["python3", "-c", code], memory_limit=memory_limit)
            ],
        ),
    )


def wait_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    done: Callable[[client.V1Pod], bool],
    timeout: float = 120,
) -> client.V1Pod:
    """Polls the pod until `done` holds; fails with the pod's last state otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if done(pod):
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {namespace}/{name} not done in {timeout}s: {pod.status}")
        time.sleep(0.5)


def finished(pod: client.V1Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
