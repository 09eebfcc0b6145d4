"""Whether this cluster can save a Computer disk, and why not (issue 28, item 6).

A save is a CSI VolumeSnapshot (:mod:`helmr.operator.disks.workspaces`); there
is no other save path. A cluster without the VolumeSnapshot API (kind ships
none), or without a VolumeSnapshotClass for the disk's CSI driver, cannot save
the disk at all. Helmr says so instead of failing each save in turn: the
Actor's ``SavesAvailable`` condition names what is missing, the saves of such a
disk are given up at once (no VolumeSnapshot is made), and every execution
loss on it says that nothing was saved (``session.execution_lost``
``savesUnavailable``).

What is checked is what the snapshot controller itself needs to take a
snapshot: the class named in the disk's settings exists or, with none named,
exactly one class of the disk's CSI driver (the provisioner of its
StorageClass, else of the cluster's default StorageClass) is marked the
default. A snapshot controller that is not running cannot be seen from here:
its saves never become ready, which the ``HelmrComputerSavesFailing`` alert
catches.

The classes are read at most once per ``ttl`` seconds, shared by every
Workspace and Actor: two lists a minute for the whole cluster.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from helmr.kube.client import ClassRef, Kube
from helmr.kube.errors import KubeError
from helmr.resources import ComputerSpec

READ_EVERY_SECONDS = 60.0
"""How long the cluster's storage classes, once read, are believed."""

_NEVER_SAVED = "so the Computer disk is never saved and an execution loss restarts it empty"


@dataclass(frozen=True, slots=True)
class ClusterStorage:
    """The cluster's StorageClasses and VolumeSnapshotClasses, as read."""

    storage_classes: tuple[ClassRef, ...]
    snapshot_classes: tuple[ClassRef, ...] | None
    """None: the cluster serves no VolumeSnapshot API (snapshot.storage.k8s.io/v1)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a disk can be saved: ``True``, ``False`` (it never is), or ``Unknown``
    (its saves are tried); a CamelCase reason and a sentence saying why."""

    available: Literal["True", "False", "Unknown"]
    reason: str
    message: str

    @property
    def why_unavailable(self) -> str | None:
        """Why the disk is never saved; None when it is, or may be."""
        return self.message if self.available == "False" else None


def verdict(storage: ClusterStorage, computer: ComputerSpec) -> Verdict:
    """Whether a disk with the settings ``computer`` can be saved on ``storage``."""
    snapshot_classes = storage.snapshot_classes
    if snapshot_classes is None:
        return Verdict(
            "False",
            "NoSnapshotApi",
            "the cluster serves no VolumeSnapshot API (snapshot.storage.k8s.io/v1),"
            f" {_NEVER_SAVED}; to save it, install the CSI external-snapshotter (its CRDs and"
            " snapshot controller) and a VolumeSnapshotClass for the disk's CSI driver",
        )
    named = computer.volume_snapshot_class_name
    if named is not None:
        if any(c.name == named for c in snapshot_classes):
            return Verdict("True", "SnapshotClass", f"saves are VolumeSnapshots of class {named}")
        return Verdict(
            "False",
            "SnapshotClassMissing",
            f"VolumeSnapshotClass {named} (computer.volumeSnapshotClassName) does not exist,"
            f" {_NEVER_SAVED}",
        )
    disk_class = _disk_class(storage.storage_classes, computer.storage_class_name)
    if isinstance(disk_class, Verdict):
        return disk_class
    driver = disk_class.driver
    defaults = [c.name for c in snapshot_classes if c.driver == driver and c.default]
    if len(defaults) == 1:
        return Verdict(
            "True",
            "DefaultSnapshotClass",
            f"saves are VolumeSnapshots of class {defaults[0]}, the default of CSI driver"
            f" {driver} (StorageClass {disk_class.name})",
        )
    return Verdict(
        "False",
        "NoDefaultSnapshotClass" if not defaults else "SeveralDefaultSnapshotClasses",
        f"{'no' if not defaults else 'more than one'} VolumeSnapshotClass is the default of"
        f" CSI driver {driver} (StorageClass {disk_class.name}), {_NEVER_SAVED}; name one in"
        " computer.volumeSnapshotClassName, or mark one"
        ' snapshot.storage.kubernetes.io/is-default-class: "true"',
    )


def _disk_class(classes: tuple[ClassRef, ...], named: str | None) -> ClassRef | Verdict:
    """The disk's StorageClass: the one named, else the cluster's default; or, when
    there is none to tell the disk's CSI driver by, the Unknown verdict saying so."""
    if named is not None:
        found = [c for c in classes if c.name == named]
        why = f"StorageClass {named} (computer.storageClassName) does not exist"
    else:
        found = [c for c in classes if c.default]
        why = f"the cluster has {len(found)} default StorageClasses"
    if len(found) == 1:
        return found[0]
    return Verdict("Unknown", "DriverUnknown", f"the disk's CSI driver cannot be told: {why}")


@dataclass
class SaveSupport:
    """Whether disks can be saved here, from the cluster's classes as last read
    (at most once per ``ttl`` seconds)."""

    kube: Kube
    ttl: float = READ_EVERY_SECONDS
    _read: tuple[float, ClusterStorage] | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def verdict(self, computer: ComputerSpec) -> Verdict:
        """Whether a disk with the settings ``computer`` can be saved; ``Unknown`` when
        the classes cannot be read (its saves are tried then)."""
        try:
            storage = await self._storage()
        except KubeError as e:
            return Verdict(
                "Unknown",
                "ClassesUnreadable",
                f"the operator cannot read the cluster's storage classes ({e.status} {e.reason})",
            )
        return verdict(storage, computer)

    async def binds_at_once(self, computer: ComputerSpec) -> bool:
        """The disk's StorageClass binds its claims as they are made (Immediate), as
        the classes were last read; False when that cannot be told (then nothing
        waits for a binding that may only come once the disk's pod is scheduled)."""
        try:
            storage = await self._storage()
        except KubeError:
            return False
        disk_class = _disk_class(storage.storage_classes, computer.storage_class_name)
        return not isinstance(disk_class, Verdict) and disk_class.binds_at_once

    async def _storage(self) -> ClusterStorage:
        async with self._lock:  # one read at a time: a pass's Workspaces share it
            now = asyncio.get_running_loop().time()
            if self._read is None or now - self._read[0] >= self.ttl:
                storage = ClusterStorage(
                    storage_classes=await self.kube.list_storage_classes(),
                    snapshot_classes=await self.kube.list_snapshot_classes(),
                )
                self._read = (now, storage)
            return self._read[1]
