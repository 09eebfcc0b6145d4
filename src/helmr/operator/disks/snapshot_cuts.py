"""When a save's point in time is cut, read off its VolumeSnapshot or, seconds
sooner, off its VolumeSnapshotContent.

The snapshot controller makes a dynamically provisioned snapshot's content
(``snapcontent-<the VolumeSnapshot's uid>``); the CSI snapshotter asks the driver
for the snapshot and writes its ``creationTime`` to the content's status at
once; the snapshot controller copies it to the VolumeSnapshot's status only on
a later pass of its own: about 3 s later on the local cluster under load
(issue 28), all of which the Session's next Turn waited. The content is
trusted only when it names the VolumeSnapshot by uid as well as by name: a
content left by an earlier VolumeSnapshot of the same name (deleted, and made
again by a retried save) says nothing of this one's cut.
"""

from __future__ import annotations

from typing import Any

CONTENT_PREFIX = "snapcontent-"
"""The snapshot controller's name for a dynamically provisioned snapshot's content,
before the VolumeSnapshot's uid (external-snapshotter's
``utils.GetDynamicSnapshotContentNameForSnapshot``)."""


def _status(obj: dict[str, Any] | None) -> dict[str, Any]:
    status: dict[str, Any] = (obj or {}).get("status") or {}
    return status


def snapshot_uid(snapshot: dict[str, Any] | None) -> str | None:
    uid = ((snapshot or {}).get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def content_name(snapshot: dict[str, Any]) -> str | None:
    """The name of the content the snapshot controller makes for ``snapshot``
    (None: the snapshot has no uid yet, as in a manifest not yet created)."""
    uid = snapshot_uid(snapshot)
    return None if uid is None else CONTENT_PREFIX + uid


def snapshot_settled(snapshot: dict[str, Any]) -> bool:
    """Whether the VolumeSnapshot's status says it is cut, ready or failed: what
    the follower of a save hands on (``Disks._follow``)."""
    status = _status(snapshot)
    return bool(status.get("creationTime") or status.get("readyToUse") or status.get("error"))


def content_cut(content: dict[str, Any] | None, snapshot: dict[str, Any] | None) -> bool:
    """Whether ``content`` says ``snapshot`` is cut: it is that snapshot's (its
    ``spec.volumeSnapshotRef`` names the snapshot's uid) and its status has a
    ``creationTime``."""
    uid = snapshot_uid(snapshot)
    if content is None or uid is None:
        return False
    ref = (content.get("spec") or {}).get("volumeSnapshotRef") or {}
    return ref.get("uid") == uid and bool(_status(content).get("creationTime"))
