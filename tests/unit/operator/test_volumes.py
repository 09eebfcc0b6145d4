"""The Computer disk's objects: claims, saves and the runner's mount, built purely."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from helmr.operator.disks.manifests import (
    DiskSpec,
    SaveSpec,
    WorkspaceRef,
    build_claim_spec,
    build_save_spec,
    disk_usage_spec,
)
from helmr.operator.runners import pods
from helmr.protocol import contract
from helmr.resources import Actor, ComputerSpec, WorkspaceSpec
from helmr.resources.workspace import save_name
from helmr.runner.disk_usage import DiskUsage

WORKSPACE = WorkspaceRef(namespace="team", name="repo", uid="uid-1")


def test_a_fresh_disk_is_an_empty_claim_owned_by_its_workspace() -> None:
    computer = ComputerSpec(size="2Gi", storage_class_name="fast")
    claim = build_claim_spec(DiskSpec(WORKSPACE, 1, computer, restore_from=None))

    assert claim["metadata"]["name"] == "repo-disk-1"
    assert claim["metadata"]["labels"] == {"helmr.dev/workspace": "repo", "helmr.dev/disk": "1"}
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Workspace", "repo", "uid-1")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "fast",
    }


def test_a_restored_disk_names_its_save_as_the_data_source() -> None:
    claim = build_claim_spec(
        DiskSpec(WORKSPACE, 3, ComputerSpec(), restore_from=save_name(WORKSPACE.name, 7))
    )

    assert claim["metadata"]["name"] == "repo-disk-3"
    assert claim["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": "repo-save-7",
    }
    assert "storageClassName" not in claim["spec"]  # the cluster's default class


def test_a_save_snapshots_the_claim_of_its_disk_and_says_what_it_saves() -> None:
    spec = SaveSpec(WORKSPACE, 7, 3, "ses_1", "turn_9", "csi-snapclass", ("turn_7", "turn_8"))
    save = build_save_spec(spec)

    assert save["metadata"]["name"] == "repo-save-7"
    assert save["metadata"]["labels"] == {
        "helmr.dev/workspace": "repo",
        "helmr.dev/disk": "3",
        "helmr.dev/save-version": "7",
        "helmr.dev/session-id": "ses_1",
        "helmr.dev/turn-id": "turn_9",
    }
    # The Turns whose state it holds: those of the saves it covers, and its own.
    assert save["metadata"]["annotations"] == {"helmr.dev/turns": "turn_7,turn_8,turn_9"}
    assert save["spec"] == {
        "source": {"persistentVolumeClaimName": "repo-disk-3"},
        "volumeSnapshotClassName": "csi-snapclass",
    }


def test_workspace_settings_override_the_actors() -> None:
    actor = ComputerSpec(size="1Gi", volume_snapshot_class_name="a", keep_saves=5)
    resolved = WorkspaceSpec(size="10Gi", keep_saves=2).resolve(actor)
    assert (resolved.size, resolved.volume_snapshot_class_name, resolved.keep_saves) == (
        "10Gi",
        "a",
        2,
    )
    assert WorkspaceSpec().resolve(actor) == actor


def _runner_spec(actor_spec: Mapping[str, Any] | None = None, **fields: Any) -> pods.RunnerSpec:
    """The RunnerSpec of an echo Actor (with ``actor_spec`` added to its spec)."""
    actor = Actor.from_manifest(
        {
            "apiVersion": "helmr.dev/v1alpha1",
            "kind": "Actor",
            "metadata": {"name": "echo", "namespace": "team"},
            "spec": {"image": "runner:dev", "entrypoint": "echo.echo:echo", **(actor_spec or {})},
        }
    )
    return pods.RunnerSpec(
        namespace="team",
        session_name="s1",
        session_uid="uid-s",
        session_id="ses_1",
        epoch=1,
        actor=actor,
        runner_url="http://helmr:8080",
        claim_name="repo-disk-1",
        **fields,
    )


def test_the_runner_mounts_the_disk_at_the_computer_path() -> None:
    spec = _runner_spec()
    pod = pods.build_runner_pod_spec(spec)
    [container] = pod["spec"]["containers"]
    assert {"name": "computer", "mountPath": "/computer"} in container["volumeMounts"]
    assert {"name": contract.ENV_COMPUTER_DIR, "value": "/computer"} in container["env"]
    assert {
        "name": "computer",
        "persistentVolumeClaim": {"claimName": "repo-disk-1"},
    } in pod["spec"]["volumes"]
    # Writable by the restricted, non-root runner through its group.
    assert pod["spec"]["securityContext"]["fsGroup"] == 65532


def test_the_runner_is_given_the_disks_size_and_thresholds_to_measure_against() -> None:
    usage = disk_usage_spec(ComputerSpec(size="20Mi", pause_at=0.95, usage_interval_seconds=1))
    pod = pods.build_runner_pod_spec(_runner_spec(disk_usage=usage))
    [container] = pod["spec"]["containers"]
    environ = {e["name"]: e["value"] for e in container["env"]}

    # What the runner reads back (helmr.runner.disk_usage).
    assert DiskUsage.from_environ(environ) == DiskUsage(
        "/computer", 20 << 20, levels=(0.85, 0.95, 0.98), interval=1.0
    )
