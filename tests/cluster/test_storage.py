"""The local cluster's storage copies data: snapshots, restores and clones.

Real PVCs of the default StorageClass (hostpath CSI driver) and real
VolumeSnapshots of the default VolumeSnapshotClass, read and written by
restricted pods running as uid 65532, as Helmr's runners are.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, cast

from kubernetes import client

from .pods import finished, restricted_container, wait_pod

SNAPSHOTS = ("snapshot.storage.k8s.io", "v1")
MOUNT = "/computer"
# The runner's uid; fsGroup makes the kubelet give the volume to its group
# (the driver's CSIDriver has fsGroupPolicy: File).
RUNNER_UID = 65532


def claim(name: str, source: dict[str, str] | None = None) -> client.V1PersistentVolumeClaim:
    """A PVC of the default StorageClass (no class named), optionally from a data source."""
    return client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": "64Mi"}),
            data_source=client.V1TypedLocalObjectReference(**source) if source else None,
        ),
    )


def wait_bound(
    core: client.CoreV1Api, namespace: str, claim_name: str, timeout: float = 120
) -> None:
    """Waits for the PVC to be Bound. A pod made before its claim of an Immediate
    class is bound can be left unscheduled for minutes: kube-scheduler may miss the
    binding (helmr.operator.runners.disk_gates says how; Helmr's runner pods wait
    gated for it the same way)."""
    deadline = time.monotonic() + timeout
    while True:
        pvc = core.read_namespaced_persistent_volume_claim(claim_name, namespace)
        if pvc.status is not None and pvc.status.phase == "Bound":
            return
        assert time.monotonic() < deadline, (
            f"claim {claim_name} not bound in {timeout}s: {pvc.status}"
        )
        time.sleep(0.1)


def run_on_volume(core: client.CoreV1Api, namespace: str, claim_name: str, code: str) -> str:
    """Runs `code` in a restricted pod with the PVC at /computer, once the PVC is
    bound; returns its log."""
    wait_bound(core, namespace, claim_name)
    name = f"p-{uuid.uuid4().hex[:8]}"
    container = restricted_container(name, ["python3", "-c", code])
    container.volume_mounts = [client.V1VolumeMount(name="computer", mount_path=MOUNT)]
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            termination_grace_period_seconds=1,
            security_context=client.V1PodSecurityContext(
                fs_group=RUNNER_UID, fs_group_change_policy="OnRootMismatch"
            ),
            containers=[container],
            volumes=[
                client.V1Volume(
                    name="computer",
                    persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                        claim_name=claim_name
                    ),
                )
            ],
        ),
    )
    core.create_namespaced_pod(namespace, pod)
    done = wait_pod(core, namespace, name, finished, timeout=180)
    log: str = core.read_namespaced_pod_log(name, namespace)
    # A finished pod still holds its claim (pvc-protection waits for the pod
    # object to go), so it goes at once.
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    assert done.status.phase == "Succeeded", log
    return log.strip()


def write(core: client.CoreV1Api, namespace: str, claim_name: str, content: str) -> None:
    log = run_on_volume(
        core,
        namespace,
        claim_name,
        f"import os; open('{MOUNT}/file', 'w').write({content!r}); "
        f"os.makedirs('{MOUNT}/dir', exist_ok=True); print(os.getuid())",
    )
    assert log == str(RUNNER_UID)


def read(core: client.CoreV1Api, namespace: str, claim_name: str) -> str:
    return run_on_volume(core, namespace, claim_name, f"print(open('{MOUNT}/file').read())")


def take_snapshot(custom: client.CustomObjectsApi, namespace: str, source: str) -> str:
    """A VolumeSnapshot of the default class; returns its name once readyToUse."""
    name = f"s-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "/".join(SNAPSHOTS),
        "kind": "VolumeSnapshot",
        "metadata": {"name": name},
        "spec": {"source": {"persistentVolumeClaimName": source}},
    }
    custom.create_namespaced_custom_object(*SNAPSHOTS, namespace, "volumesnapshots", body)
    deadline = time.monotonic() + 120
    while True:
        snap = cast(
            dict[str, Any],
            custom.get_namespaced_custom_object(*SNAPSHOTS, namespace, "volumesnapshots", name),
        )
        if snap.get("status", {}).get("readyToUse"):
            return name
        assert time.monotonic() < deadline, f"snapshot {name} not ready: {snap.get('status')}"
        time.sleep(0.5)


def test_restore_from_snapshot_reads_the_bytes_of_snapshot_time(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    old, new = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    core.create_namespaced_persistent_volume_claim(namespace, claim("disk"))
    write(core, namespace, "disk", old)

    snapshot = take_snapshot(custom, namespace, "disk")
    write(core, namespace, "disk", new)
    assert read(core, namespace, "disk") == new

    source = {"api_group": SNAPSHOTS[0], "kind": "VolumeSnapshot", "name": snapshot}
    core.create_namespaced_persistent_volume_claim(namespace, claim("restored", source))
    assert read(core, namespace, "restored") == old
    # The restored copy is writable by the runner too, and independent of the original.
    write(core, namespace, "restored", "third")
    assert read(core, namespace, "disk") == new


def test_clone_copies_the_source_volume(core: client.CoreV1Api, namespace: str) -> None:
    content = f"cloned-{uuid.uuid4().hex}"
    core.create_namespaced_persistent_volume_claim(namespace, claim("disk"))
    write(core, namespace, "disk", content)

    source = {"api_group": "", "kind": "PersistentVolumeClaim", "name": "disk"}
    core.create_namespaced_persistent_volume_claim(namespace, claim("clone", source))
    write(core, namespace, "disk", "changed after the clone")
    assert read(core, namespace, "clone") == content


def test_deleting_claims_and_snapshots_removes_their_volumes_and_contents(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api_client)
    core.create_namespaced_persistent_volume_claim(namespace, claim("disk"))
    write(core, namespace, "disk", "bytes")
    snapshot = take_snapshot(custom, namespace, "disk")
    snap = custom.get_namespaced_custom_object(*SNAPSHOTS, namespace, "volumesnapshots", snapshot)
    content_name = snap["status"]["boundVolumeSnapshotContentName"]
    volume_name = core.read_namespaced_persistent_volume_claim("disk", namespace).spec.volume_name

    custom.delete_namespaced_custom_object(*SNAPSHOTS, namespace, "volumesnapshots", snapshot)
    core.delete_namespaced_persistent_volume_claim("disk", namespace)

    # The provisioner and the snapshotter retry with backoff: allow for a busy node.
    deadline = time.monotonic() + 180
    while True:
        names = {pv.metadata.name for pv in core.list_persistent_volume().items} | {
            c["metadata"]["name"]
            for c in custom.list_cluster_custom_object(*SNAPSHOTS, "volumesnapshotcontents")[
                "items"
            ]
        }
        if not names & {volume_name, content_name}:
            return
        assert time.monotonic() < deadline, f"still there: {names & {volume_name, content_name}}"
        time.sleep(0.5)
