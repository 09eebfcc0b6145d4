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

Both are followed through kopf's watches (:class:`SnapshotWatch`): a cut is
seen within milliseconds of being written, where reading the snapshot every
0.25 s made about 24 GETs per save, a third of the apiserver's requests under
``tests/cluster/test_turn_stress.py``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
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


@dataclass(eq=False)
class Followed:
    """A save's snapshot just taken, and its content, as last seen."""

    snapshot: dict[str, Any] | None = None
    content: dict[str, Any] | None = None
    gone: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def seen(self) -> None:
        self._changed.set()

    async def changed(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Whether the watch told of a change since last asked, waiting for one at
        most ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        except TimeoutError:
            return False
        self._changed.clear()
        return True


class SnapshotWatch:
    """The saves' snapshots being followed until cut, by namespace and name, told
    of each change of them and of their contents by kopf's watches
    (``helmr.operator.kopf.handlers.save_snapshot_event``): the cut is seen as it is
    written, with no read of the apiserver. Objects not followed are passed over."""

    def __init__(self) -> None:
        self._followed: dict[tuple[str, str], Followed] = {}

    def follow(self, namespace: str, name: str) -> Followed:
        """Follows the snapshot ``namespace/name`` (before it is made: its first
        events carry its uid, which its content names)."""
        followed = self._followed[(namespace, name)] = Followed()
        return followed

    def forget(self, namespace: str, name: str) -> None:
        self._followed.pop((namespace, name), None)

    def snapshot_event(self, event: str | None, body: Mapping[str, Any]) -> None:
        """A VolumeSnapshot's watch event (``event`` None: listed)."""
        meta = body.get("metadata") or {}
        followed = self._followed.get((str(meta.get("namespace")), str(meta.get("name"))))
        if followed is None:
            return
        if event == "DELETED":
            followed.gone = True
        else:
            followed.snapshot = copy.deepcopy(dict(body))
        followed.seen()

    def content_event(self, event: str | None, body: Mapping[str, Any]) -> None:
        """A VolumeSnapshotContent's watch event: told to the follower of the snapshot
        it names (whose uid it is checked against then, :func:`content_cut`)."""
        ref = (body.get("spec") or {}).get("volumeSnapshotRef") or {}
        followed = self._followed.get((str(ref.get("namespace")), str(ref.get("name"))))
        if followed is None or event == "DELETED":
            return
        followed.content = copy.deepcopy(dict(body))
        followed.seen()
