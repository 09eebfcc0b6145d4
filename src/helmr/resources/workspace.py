"""The ``Workspace`` resource: the Computer disk a Session holds while open.

A Workspace owns its disk's PersistentVolumeClaims and its saves
(VolumeSnapshots) through owner references, so deleting the Workspace removes
them even while no operator runs, and no finalizer can wedge namespace
deletion. Its spec overrides the Actor's ``computer`` settings.
"""

from __future__ import annotations

from pydantic import Field

from helmr.resources.actor import (
    AccessMode,
    ComputerSpec,
    KeepSaves,
    SaveInterval,
    UsageInterval,
    UsedFraction,
)
from helmr.resources.base import Resource, Status, WireModel
from helmr.resources.columns import AGE, column
from helmr.resources.fields import LABEL_NAME_SCHEMA, Conditions, DnsLabel, DnsSubdomain, Quantity


class WorkspaceSpec(WireModel):
    """Overrides of the Actor's `computer` settings for this Workspace's disk."""

    size: Quantity | None = Field(
        default=None, description="Size of the Computer disk. Unset: the Actor's `computer.size`."
    )
    storage_class_name: DnsSubdomain | None = Field(
        default=None,
        description="StorageClass of the disk's PVCs. Unset: the Actor's, else the default class.",
    )
    volume_snapshot_class_name: DnsSubdomain | None = Field(
        default=None,
        description=(
            "VolumeSnapshotClass of the disk's saves. Unset: the Actor's, else the default class"
            " of the disk's CSI driver; without one the disk is never saved."
        ),
    )
    access_mode: AccessMode | None = Field(
        default=None, description="Access mode of the disk's PVCs. Unset: the Actor's."
    )
    keep_saves: KeepSaves | None = Field(
        default=None, description="How many ready saves are kept. Unset: the Actor's."
    )
    save_interval_seconds: SaveInterval | None = Field(
        default=None,
        description="At most one save per this many seconds (0: every Turn). Unset: the Actor's.",
    )
    pause_at: UsedFraction | None = Field(
        default=None, description="Used share that pauses the Session. Unset: the Actor's."
    )
    stop_at: UsedFraction | None = Field(
        default=None, description="Used share that stops the running Turn. Unset: the Actor's."
    )
    resolve_at: UsedFraction | None = Field(
        default=None, description="Used share below which pressure resolves. Unset: the Actor's."
    )
    usage_interval_seconds: UsageInterval | None = Field(
        default=None, description="Seconds between usage measurements. Unset: the Actor's."
    )

    def resolve(self, actor: ComputerSpec) -> ComputerSpec:
        """The disk settings in force: this Workspace's overrides, else the Actor's."""
        overrides = {name: value for name, value in self if value is not None}
        return actor.model_copy(update=overrides)


class ForkedFrom(WireModel):
    """The lineage of a forked Workspace: the save of a Turn of another Session."""

    session: str = Field(description="The id of the Session forked (it is left untouched).")
    workspace: DnsSubdomain = Field(description="The Workspace of the Session forked.")
    save: DnsSubdomain = Field(
        description="The save (VolumeSnapshot) this Workspace's first disk is restored from."
    )
    turn: str = Field(description="The id of the Turn whose state the save holds.")


class WorkspaceStatus(Status):
    """The disk's state, mirrored by the operator from the timeline store."""

    claim_name: DnsSubdomain | None = Field(
        default=None, description="The PersistentVolumeClaim the next runner mounts."
    )
    computer_version: DnsSubdomain | None = Field(
        default=None,
        description="The last committed save: the name of its VolumeSnapshot.",
    )
    restored_from: DnsSubdomain | None = Field(
        default=None,
        description="The save the current claim was restored from after an execution loss.",
    )
    pending_saves: int | None = Field(
        default=None, ge=0, description="Saves requested and not yet ready."
    )
    held_by: DnsLabel | None = Field(
        default=None,
        description=(
            "The Session that holds the Workspace: it is open, or its execution is not yet"
            " excluded. A held Workspace cannot be deleted."
        ),
    )
    forked_from: ForkedFrom | None = Field(
        default=None, description="Its lineage, if it is a fork: the save it started from."
    )
    conditions: Conditions = None


class Workspace(Resource[WorkspaceSpec, WorkspaceStatus]):
    """A Computer disk (PVC) and its saves (VolumeSnapshots), held by one open Session at a time."""

    KIND = "Workspace"
    PLURAL = "workspaces"
    SHORT_NAMES = ("hws",)
    PRINTER_COLUMNS = (
        column("Held By", ".status.heldBy"),
        column("Version", ".status.computerVersion"),
        column("Pending", ".status.pendingSaves", type="integer"),
        column("Forked From", ".status.forkedFrom.save"),
        column("Claim", ".status.claimName", priority=1),
        AGE,
    )
    # Claims and saves carry the Workspace's name as a label value.
    NAME_SCHEMA = LABEL_NAME_SCHEMA


def claim_name(workspace: str, disk: int) -> str:
    """The PVC of a Workspace's disk generation ``disk`` (1, then one more per restore)."""
    return f"{workspace}-disk-{disk}"


def disk_claim(workspace: str, disk: int, first_claim: str | None) -> str:
    """The PVC of the Workspace's disk generation ``disk``: ``first_claim`` for the first
    one when it was adopted from a warm pool (a pooled pod's claim), else :func:`claim_name`."""
    if disk == 1 and first_claim is not None:
        return first_claim
    return claim_name(workspace, disk)


def save_name(workspace: str, version: int) -> str:
    """The VolumeSnapshot of save ``version``: also the Computer version it commits."""
    return f"{workspace}-save-{version}"


def parse_save_name(name: str) -> tuple[str, int]:
    """The Workspace and version a :func:`save_name` names."""
    workspace, _, version = name.rpartition("-save-")
    return workspace, int(version)
