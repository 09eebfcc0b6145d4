"""Pure builders of the Computer disk's Kubernetes objects: the Workspace, its
PersistentVolumeClaims (one per disk generation) and its saves (VolumeSnapshots).

Claims and saves are owned by the Workspace, so deleting it removes them
through the garbage collector, also while no operator runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helmr.control import StorageLimits
from helmr.control.adoptions import AdoptedDisk
from helmr.kube.labels import (
    ANNOTATION_TURNS,
    LABEL_DISK,
    LABEL_SAVE_VERSION,
    LABEL_SESSION_ID,
    LABEL_TURN_ID,
    LABEL_WORKSPACE,
)
from helmr.kube.quantities import quantity_bytes
from helmr.kube.snapshots import SNAPSHOT_GROUP, SNAPSHOT_VERSION
from helmr.resources import API_VERSION, ComputerSpec, Workspace, WorkspaceSpec
from helmr.resources.base import ObjectMeta
from helmr.resources.workspace import claim_name, save_name


@dataclass(frozen=True, slots=True)
class WorkspaceRef:
    """The Workspace CR that owns a disk's objects."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, workspace: Workspace) -> WorkspaceRef:
        meta = workspace.metadata
        if meta.namespace is None or meta.name is None or meta.uid is None:
            raise ValueError("a Workspace read from the apiserver has a namespace, name and uid")
        return cls(namespace=meta.namespace, name=meta.name, uid=meta.uid)


@dataclass(frozen=True, slots=True)
class DiskSpec:
    """Everything that decides one disk generation's claim."""

    workspace: WorkspaceRef
    disk: int
    computer: ComputerSpec
    restore_from: str | None
    """The save (VolumeSnapshot) to restore from; None: an empty disk."""
    claim: str | None = None
    """The claim's name; None: :func:`claim_name` of its Workspace and generation."""


@dataclass(frozen=True, slots=True)
class DiskUsageSpec:
    """How a runner's disk usage is watched: what the store compares the runner's
    reports with, and how often the runner measures."""

    limits: StorageLimits
    interval_seconds: int


@dataclass(frozen=True, slots=True)
class PreparedDisk:
    """The claim a Session's next runner mounts, and how its usage is watched."""

    claim: str
    usage: DiskUsageSpec
    bound: bool = True
    """False: the claim is not bound yet, and its StorageClass binds it by itself
    (Immediate), not for the pod that mounts it: that pod waits for the binding
    (:mod:`helmr.operator.runners.disk_gates`)."""


@dataclass(frozen=True, slots=True)
class PoolDisk:
    """A pooled claim as a Workspace's first disk: the Workspace that owns it once
    adopted, and what the adoption's transaction stores of it."""

    workspace: WorkspaceRef
    disk: AdoptedDisk


def disk_usage_spec(computer: ComputerSpec) -> DiskUsageSpec:
    """The disk settings in force as usage thresholds: the claim's size in bytes."""
    limits = StorageLimits(
        capacity_bytes=quantity_bytes(computer.size),
        pause_at=computer.pause_at,
        stop_at=computer.stop_at,
        resolve_at=computer.resolve_at,
    )
    return DiskUsageSpec(limits=limits, interval_seconds=computer.usage_interval_seconds)


def build_workspace(namespace: str, name: str) -> Workspace:
    """A Workspace with the Actor's settings (no overrides), created on first use."""
    return Workspace(metadata=ObjectMeta(name=name, namespace=namespace), spec=WorkspaceSpec())


def workspace_owner(workspace: WorkspaceRef) -> dict[str, Any]:
    """The owner reference of a Workspace's claims and saves (garbage-collected with it)."""
    return {
        "apiVersion": API_VERSION,
        "kind": Workspace.KIND,
        "name": workspace.name,
        "uid": workspace.uid,
        "controller": True,
        # Not blockOwnerDeletion: a Workspace deleted in the foreground must
        # not wait on claims whose protection waits on a terminating pod.
    }


def _metadata(workspace: WorkspaceRef, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": workspace.namespace,
        "labels": {LABEL_WORKSPACE: workspace.name} | labels,
        "ownerReferences": [workspace_owner(workspace)],
    }


def build_claim_spec(spec: DiskSpec) -> dict[str, Any]:
    """The PVC of one disk generation, restored from a save when ``restore_from`` is set."""
    name = spec.claim or claim_name(spec.workspace.name, spec.disk)
    metadata = _metadata(spec.workspace, name, {LABEL_DISK: str(spec.disk)})
    claim: dict[str, Any] = {
        "accessModes": [spec.computer.access_mode],
        "resources": {"requests": {"storage": spec.computer.size}},
    }
    if spec.computer.storage_class_name is not None:
        claim["storageClassName"] = spec.computer.storage_class_name
    if spec.restore_from is not None:
        claim["dataSource"] = {
            "apiGroup": SNAPSHOT_GROUP,
            "kind": "VolumeSnapshot",
            "name": spec.restore_from,
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": claim,
    }


def claim_bound(claim: dict[str, Any] | None) -> bool:
    """The claim, as read from the apiserver, is Bound to its volume."""
    return ((claim or {}).get("status") or {}).get("phase") == "Bound"


@dataclass(frozen=True, slots=True)
class SaveSpec:
    """Everything that decides one save's VolumeSnapshot."""

    workspace: WorkspaceRef
    version: int
    disk: int
    session_id: str
    turn_id: str
    snapshot_class: str | None
    covered_turns: tuple[str, ...] = ()
    """The Turns of the saves it covers, oldest first: its snapshot holds their state too."""
    claim: str | None = None
    """The claim it snapshots; None: :func:`claim_name` of its Workspace and ``disk``."""


def build_save_spec(spec: SaveSpec) -> dict[str, Any]:
    """The VolumeSnapshot of save ``version``, taken of the claim of disk ``disk``,
    naming the Turns whose state it holds."""
    metadata = _metadata(
        spec.workspace,
        save_name(spec.workspace.name, spec.version),
        {
            LABEL_DISK: str(spec.disk),
            LABEL_SAVE_VERSION: str(spec.version),
            LABEL_SESSION_ID: spec.session_id,
            LABEL_TURN_ID: spec.turn_id,
        },
    )
    metadata["annotations"] = {ANNOTATION_TURNS: ",".join((*spec.covered_turns, spec.turn_id))}
    body: dict[str, Any] = {
        "source": {
            "persistentVolumeClaimName": spec.claim or claim_name(spec.workspace.name, spec.disk)
        }
    }
    if spec.snapshot_class is not None:
        body["volumeSnapshotClassName"] = spec.snapshot_class
    return {
        "apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}",
        "kind": "VolumeSnapshot",
        "metadata": metadata,
        "spec": body,
    }


def snapshot_of_turn(snapshot: dict[str, Any], session_id: str, turn_id: str) -> bool:
    """Whether ``snapshot``, named as a save of its Workspace, was made for the save
    of ``turn_id``: one left by an earlier Workspace of the same name (deleted and
    made again before its snapshots were collected) names another Turn. A snapshot
    that names none is taken to be the save's (nothing says otherwise)."""
    labels: dict[str, str] = (snapshot.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(LABEL_SESSION_ID, session_id) == session_id
        and labels.get(LABEL_TURN_ID, turn_id) == turn_id
    )


def owned_by_another_workspace(obj: dict[str, Any], workspace: Workspace) -> bool:
    """Whether ``obj`` (a claim named as one of ``workspace``'s disks) is owned by
    another Workspace than this one: an earlier Workspace's of the same name. One
    owned by no Workspace (a pooled claim not yet relabelled) is not."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(
        owner.get("kind") == Workspace.KIND and owner.get("uid") != workspace.metadata.uid
        for owner in owners
    )
