"""Whether the cluster can save a Computer disk (helmr.operator.disks.save_support):
what the snapshot controller needs, read off the cluster's classes; the Actor's
``SavesAvailable`` condition; and the saves of a disk that cannot be saved, given
up at once with no VolumeSnapshot made (issue 28, item 6)."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.kube.client import ClassRef
from helmr.kube.errors import Forbidden
from helmr.operator.disks.save_support import ClusterStorage, SaveSupport, Verdict, verdict
from helmr.operator.disks.workspaces import Disks
from helmr.operator.mirror.actor_acceptance import ActorRecheck
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import ActorStatus, ComputerSpec
from helmr.store.rows import SaveRow
from tests.unit.control.harness import Harness

from .stub_kube import DRIVER, StubKube
from .test_actor_recheck import actor
from .test_disks import DiskKube, _complete_another, _session_with_a_completed_turn, _with_actor

HOSTPATH = ClassRef("hostpath", DRIVER, default=True)
FAST = ClassRef("fast", "ebs.csi.aws.com", default=False)


def _verdict(snapshot_classes: tuple[ClassRef, ...] | None, **computer: Any) -> tuple[str, str]:
    storage = ClusterStorage(storage_classes=(HOSTPATH, FAST), snapshot_classes=snapshot_classes)
    found = verdict(storage, ComputerSpec.model_validate(computer))
    return found.available, found.reason


@pytest.mark.parametrize(
    ("snapshot_classes", "computer", "expected"),
    [
        (None, {}, ("False", "NoSnapshotApi")),
        ((HOSTPATH,), {}, ("True", "DefaultSnapshotClass")),
        ((ClassRef("x", DRIVER, default=False),), {}, ("False", "NoDefaultSnapshotClass")),
        (
            (HOSTPATH, ClassRef("y", DRIVER, default=True)),
            {},
            ("False", "SeveralDefaultSnapshotClasses"),
        ),
        # The default of another driver than the disk's does not save it.
        ((HOSTPATH,), {"storageClassName": "fast"}, ("False", "NoDefaultSnapshotClass")),
        ((HOSTPATH,), {"storageClassName": "absent"}, ("Unknown", "DriverUnknown")),
        ((HOSTPATH,), {"volumeSnapshotClassName": "hostpath"}, ("True", "SnapshotClass")),
        ((HOSTPATH,), {"volumeSnapshotClassName": "absent"}, ("False", "SnapshotClassMissing")),
        (None, {"volumeSnapshotClassName": "hostpath"}, ("False", "NoSnapshotApi")),
    ],
)
def test_what_the_snapshot_controller_needs(
    snapshot_classes: tuple[ClassRef, ...] | None,
    computer: dict[str, Any],
    expected: tuple[str, str],
) -> None:
    assert _verdict(snapshot_classes, **computer) == expected


def test_without_one_default_storage_class_the_driver_cannot_be_told() -> None:
    storage = ClusterStorage(storage_classes=(FAST,), snapshot_classes=(HOSTPATH,))
    found = verdict(storage, ComputerSpec())
    assert (found.available, found.reason) == ("Unknown", "DriverUnknown")
    assert found.why_unavailable is None  # its saves are tried


class UnreadableKube(StubKube):
    async def list_storage_classes(self) -> tuple[ClassRef, ...]:
        raise Forbidden(reason="Forbidden")


async def test_classes_are_read_once_a_ttl_and_unreadable_ones_leave_it_unknown() -> None:
    kube = StubKube()
    support = SaveSupport(kube)
    for _ in range(3):
        assert (await support.verdict(ComputerSpec())).available == "True"
    assert kube.class_reads == 1
    fresh = SaveSupport(kube, ttl=0)
    await fresh.verdict(ComputerSpec())
    await fresh.verdict(ComputerSpec())
    assert kube.class_reads == 3

    unreadable = await SaveSupport(UnreadableKube()).verdict(ComputerSpec())
    assert unreadable == Verdict(
        "Unknown",
        "ClassesUnreadable",
        "the operator cannot read the cluster's storage classes (403 Forbidden)",
    )


async def test_an_actor_says_whether_its_disks_can_be_saved() -> None:
    kube = StubKube()
    recheck = ActorRecheck(kube, SaveSupport(kube, ttl=0))
    await recheck.check(actor("a", policy="IfNotPresent"))
    assert _saves_condition(kube) == ("True", "DefaultSnapshotClass")

    kube.snapshot_classes = None
    await recheck.check(actor("a", policy="IfNotPresent"))
    status, reason, message = _saves_condition(kube, with_message=True)
    assert (status, reason) == ("False", "NoSnapshotApi")
    assert "never saved" in message
    assert "install the CSI external-snapshotter" in message


def _saves_condition(kube: StubKube, *, with_message: bool = False) -> Any:
    status = kube.statuses[("Actor", "a")]
    assert isinstance(status, ActorStatus)
    [saves] = [c for c in status.conditions or [] if c.type == "SavesAvailable"]
    if with_message:
        return saves.status, saves.reason, saves.message
    return saves.status, saves.reason


async def test_saves_of_a_disk_the_cluster_cannot_save_are_given_up_at_once(h: Harness) -> None:
    """No VolumeSnapshot is made and nothing is retried: each save is given up as its
    turn comes, with why, and so are the saves it covered; the Turns stay completed."""
    kube = _with_actor(DiskKube())
    kube.snapshot_classes = None
    metrics = OperatorMetrics()
    disks = Disks(h.control, kube, metrics)
    ended: list[SaveRow] = []
    disks.save_ended = ended.append
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await _complete_another(h.control, session_id)

    await disks.reconcile()

    assert kube.created_snapshots == []
    assert await h.control.saves_to_step() == []
    assert sorted((s.version, s.status) for s in ended) == [(1, "covered"), (2, "failed")]
    [given_up] = [s for s in ended if s.version == 2]
    assert given_up.error is not None
    assert given_up.error.startswith("saves are unavailable: the cluster serves no VolumeSnapshot")
    assert metrics.saves.labels("unavailable")._value.get() == 1
    why = await disks.why_unsaved(await h.control.get_session(session_id))
    assert why is not None
    assert why.startswith("the cluster serves no VolumeSnapshot API")
