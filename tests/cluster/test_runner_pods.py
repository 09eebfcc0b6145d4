"""An Actor's runner pod settings (`spec.pod`) on real pods (issue 30, item 1).

- A private registry's pull Secret and `imagePullPolicy: Always` reach the
  runner pod's spec, and the kubelet does try to pull: from an address on this
  machine where no registry listens, so the pull fails (no traffic leaves the
  machine) and the Session's preparation fails with the kubelet's reason.
- A RuntimeClass named by an Actor is the runner pod's, and a Session runs a
  Turn to completion under it: `helmr-sandbox`, which hack/cluster-up.sh
  registers with a containerd handler of its own (runc through a binary of its
  own: the plumbing a gVisor or Kata class uses), and containerd's record of
  the pod's containers names that handler and binary; a RuntimeClass that does
  not exist fails the preparation naming it.
- The placement, labels and annotations an Actor sets are the pod's, merged
  with Helmr's own labels, and the pod stays restricted (the namespaces here
  enforce the restricted Pod Security Standard).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass

import pytest
from kubernetes import client

from helmr.client import Client, Session, SessionRef
from helmr.kube.labels import LABEL_COMPONENT, LABEL_SESSION_ID, RUNNER

from .pods import PodHistory
from .sessions import all_events, create_actor, event_data, eventually, start_session

CLUSTER_DIR = os.environ.get("HELMR_CLUSTER_DIR", "/var/lib/helmr-cluster")
"""The local cluster's directory (hack/lib/common.sh): these tests run on its node."""
CONTAINERD_SOCK = f"{CLUSTER_DIR}/containerd/containerd.sock"
UNREACHABLE_REGISTRY = "127.0.0.1:1"
"""A registry address on this machine where nothing listens: a pull fails at once."""
UNREACHABLE_IMAGE = f"{UNREACHABLE_REGISTRY}/helmr/runner:dev"
PULL_SECRET = "private-registry"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff")


def _pull_secret(name: str) -> client.V1Secret:
    auth = base64.b64encode(b"robot:not-a-real-password").decode()
    config = {"auths": {UNREACHABLE_REGISTRY: {"auth": auth}}}
    return client.V1Secret(
        metadata=client.V1ObjectMeta(name=name),
        type="kubernetes.io/dockerconfigjson",
        string_data={".dockerconfigjson": json.dumps(config)},
    )


def _waiting_reason(pod: client.V1Pod) -> str | None:
    statuses = pod.status.container_statuses or []
    waiting = statuses[0].state.waiting if statuses else None
    return str(waiting.reason) if waiting is not None else None


async def test_a_pull_secret_and_always_reach_the_pod_and_the_pull_is_tried(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    pod_history: PodHistory,
) -> None:
    core.create_namespaced_secret(namespace, _pull_secret(PULL_SECRET))
    actor = create_actor(
        api_client,
        namespace,
        UNREACHABLE_IMAGE,
        "private",
        imagePullPolicy="Always",
        retry={"maxAttempts": 1, "backoffSeconds": 0},
        pod={"imagePullSecrets": [{"name": PULL_SECRET}]},
    )
    session = await start_session(helmr, namespace, actor)
    await session.enqueue("never runs")

    def failed_pull() -> client.V1Pod | None:
        pulled = [p for p in pod_history.present.values() if _waiting_reason(p) in PULL_FAILURES]
        return pulled[0] if pulled else None

    pod = await eventually(failed_pull, timeout=120, what="the runner pod's pull to fail")
    assert [s.name for s in pod.spec.image_pull_secrets] == [PULL_SECRET]
    [container] = pod.spec.containers
    assert (container.image, container.image_pull_policy) == (UNREACHABLE_IMAGE, "Always")

    # The kubelet's reason is the Session's: one attempt, then it fails.
    ended = await eventually(
        lambda: _failed(session), timeout=120, what="the session to fail its preparation"
    )
    assert ended.failure_reason.startswith("preparation_exhausted: "), ended.failure_reason
    assert any(reason in ended.failure_reason for reason in PULL_FAILURES), ended.failure_reason
    [attempt] = [
        d
        for d in event_data(await all_events(session), "session.process_failed")
        if d["reason"] == "preparation_failed"
    ]
    assert UNREACHABLE_IMAGE in attempt["detail"]


async def test_a_runtime_class_that_does_not_exist_fails_the_preparation_naming_it(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    # The apiserver refuses the pod (the RuntimeClass admission plugin): a failed
    # preparation at once, not a pod pending until the preparation deadline.
    missing = f"{namespace}-missing"
    actor = create_actor(
        api_client,
        namespace,
        runner_image,
        "misplaced",
        retry={"maxAttempts": 1, "backoffSeconds": 0},
        pod={"runtimeClassName": missing},
    )
    session = await start_session(helmr, namespace, actor)
    await session.enqueue("never runs")

    ended = await eventually(
        lambda: _failed(session), timeout=60, what="the session to fail its preparation"
    )
    assert ended.failure_reason.startswith("preparation_exhausted: runner pod not created")
    assert missing in ended.failure_reason


async def _failed(session: SessionRef) -> Session | None:
    got = await session.retrieve()
    return got if got.status == "failed" else None


SANDBOX = "helmr-sandbox"
"""The RuntimeClass and containerd handler hack/cluster-up.sh registers."""
SANDBOX_RUNTIME = f"{CLUSTER_DIR}/bin/helmr-sandbox-runc"
"""The runtime binary of that handler (runc, through a binary of its own)."""


@pytest.fixture
def runtime_class(api_client: client.ApiClient) -> str:
    """The local cluster's second RuntimeClass, whose handler is not containerd's default."""
    runtime = client.NodeV1Api(api_client).read_runtime_class(SANDBOX)
    assert runtime.handler == SANDBOX, "hack/cluster-up.sh registers it: run make cluster-up"
    return SANDBOX


@dataclass
class ContainerdRecord:
    """How containerd ran one container of a pod."""

    kind: str
    """``sandbox`` (the pod's) or ``container``."""
    options: bytes
    """The runtime's options as containerd holds them (runc's, a protobuf)."""


def containerd_records(pod_uid: str) -> list[ContainerdRecord]:
    """What the node's containerd says of a pod's containers (``ctr containers info``)."""
    ctr = ["ctr", "--address", CONTAINERD_SOCK, "--namespace", "k8s.io", "containers"]
    listed = subprocess.run(
        [*ctr, "ls", "--quiet", f'labels."io.kubernetes.pod.uid"=={pod_uid}'],
        capture_output=True,
        text=True,
        check=True,
    )
    records = []
    for container in listed.stdout.split():
        info = json.loads(
            subprocess.run(
                [*ctr, "info", container], capture_output=True, text=True, check=True
            ).stdout
        )
        records.append(
            ContainerdRecord(
                kind=info["Labels"]["io.cri-containerd.kind"],
                options=base64.b64decode(info["Runtime"]["Options"].get("value", "")),
            )
        )
    return records


async def test_a_session_runs_under_the_runtime_class_its_actor_names(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
    runtime_class: str,
    pod_history: PodHistory,
) -> None:
    pod_settings = {
        "runtimeClassName": runtime_class,
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "example.com/agents", "operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "Exists"}
                            ]
                        },
                    }
                ]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {LABEL_COMPONENT: RUNNER}},
            }
        ],
        "labels": {"team": "reviews"},
        "annotations": {"example.com/owner": "reviews team"},
    }
    actor = create_actor(api_client, namespace, runner_image, "sandboxed", pod=pod_settings)
    session = await start_session(helmr, namespace, actor)

    turn = await session.enqueue("under a runtime class")
    done = await turn.wait(timeout=120)

    assert done.status == "completed", done
    assert done.result == {"echo": "under a runtime class"}
    [name] = pod_history.added
    pod = core.read_namespaced_pod(name, namespace)
    assert pod.spec.runtime_class_name == runtime_class
    assert pod.spec.node_selector == {"kubernetes.io/os": "linux"}
    assert [t.key for t in pod.spec.tolerations if t.key == "example.com/agents"]
    assert pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    assert pod.spec.topology_spread_constraints[0].topology_key == "kubernetes.io/hostname"
    assert pod.metadata.labels["team"] == "reviews"
    assert pod.metadata.labels[LABEL_SESSION_ID] == session.id
    assert pod.metadata.annotations["example.com/owner"] == "reviews team"
    # The node ran it under the class's handler: the pod's sandbox and its container.
    records = containerd_records(str(pod.metadata.uid))
    assert {r.kind for r in records} == {"sandbox", "container"}, records
    assert all(SANDBOX_RUNTIME.encode() in r.options for r in records), records
    # Still restricted and without API credentials: the settings added, never loosened.
    assert pod.spec.automount_service_account_token is False
    assert pod.spec.security_context.run_as_non_root is True
    assert pod.spec.host_network in (None, False)
