"""Small builders and waits for pods in cluster tests (restricted Pod Security),
and a watch that records every change of the runner pods."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes import client, config, watch

from helmr.kube.labels import LABEL_COMPONENT, RUNNER

RUNNER_SELECTOR = f"{LABEL_COMPONENT}={RUNNER}"

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


@dataclass
class PodHistory:
    """Follows the runner pods of one namespace with a watch, so no state between
    two polls goes unseen: ``counts`` holds how many runner pods existed after
    each change, in the apiserver's order."""

    namespace: str
    kubeconfig: str
    present: dict[str, client.V1Pod] = field(default_factory=dict)
    counts: list[int] = field(default_factory=list)
    live_counts: list[int] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        api = config.new_client_from_config(config_file=self.kubeconfig)  # type: ignore[no-untyped-call]
        core = client.CoreV1Api(api)
        listed = core.list_namespaced_pod(self.namespace, label_selector=RUNNER_SELECTOR)
        for pod in listed.items:
            self._apply("ADDED", pod)
        self._thread = threading.Thread(
            target=self._follow, args=(core, listed.metadata.resource_version), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self.error is not None:
            raise AssertionError("the pod watch failed") from self.error

    def _follow(self, core: client.CoreV1Api, version: str) -> None:
        try:
            while not self._stop.is_set():
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    core.list_namespaced_pod,
                    self.namespace,
                    label_selector=RUNNER_SELECTOR,
                    resource_version=version,
                    timeout_seconds=2,
                    # Bookmarks keep the version current while no pod changes, so a
                    # quiet watch resumes from a version the apiserver still has
                    # (else 410 Gone once etcd compacts past it).
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"pod watch error: {event['raw_object']}")
                    pod: client.V1Pod = event["object"]
                    version = str(pod.metadata.resource_version)
                    if event["type"] != "BOOKMARK":
                        self._apply(event["type"], pod)
        except BaseException as e:  # reported by stop()
            self.error = e

    def _apply(self, kind: str, pod: client.V1Pod) -> None:
        name = str(pod.metadata.name)
        if kind == "DELETED":
            self.present.pop(name, None)
            self.deleted.append(name)
        else:
            if name not in self.present and name not in self.added:
                self.added.append(name)
            self.present[name] = pod
        self.counts.append(len(self.present))
        self.live_counts.append(
            len(
                [
                    p
                    for p in self.present.values()
                    if p.metadata.deletion_timestamp is None
                    and p.status.phase in (None, "Pending", "Running")
                ]
            )
        )


def serve(
    core: client.CoreV1Api, namespace: str, name: str, code: str, port: int
) -> tuple[str, str]:
    """A pod running ``code`` (labelled ``role: <name>``) and a Service of it at
    ``port``, both ``name``, once ready: the pod's address and the Service's."""
    core.create_namespaced_pod(namespace, python_pod(name, code, labels={"role": name}))
    core.create_namespaced_service(
        namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1ServiceSpec(
                selector={"role": name}, ports=[client.V1ServicePort(port=port)]
            ),
        ),
    )
    pod = wait_pod(core, namespace, name, lambda p: bool(p.status.pod_ip) and ready(p))
    service = core.read_namespaced_service(name, namespace)
    return str(pod.status.pod_ip), str(service.spec.cluster_ip)
