"""kopf's watches of VolumeSnapshots and VolumeSnapshotContents reach the follower
of each save just taken (``Disks.snapshots``), and only it: what kopf hands over
is copied out of its body, and objects nobody follows are passed over."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any, cast

import kopf

from helmr.operator.disks.snapshot_cuts import SnapshotWatch, content_cut
from helmr.operator.kopf import handlers

NS = "team"


def _handler(name: str) -> Callable[..., Coroutine[Any, Any, None]]:
    # kopf types its decorated handlers as its own callback protocol.
    return cast(Callable[..., Coroutine[Any, Any, None]], getattr(handlers, name))


async def _event(handler: str, watch: SnapshotWatch, type: str | None, raw: dict[str, Any]) -> None:
    memo = {"control_plane": SimpleNamespace(disks=SimpleNamespace(snapshots=watch))}
    await _handler(handler)(type=type, body=kopf.Body(cast(Any, raw)), memo=memo)


def _snapshot(name: str, uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": name, "uid": uid}, "status": {}}


def _content(name: str, uid: str, cut: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": f"snapcontent-{uid}"},
        "spec": {"volumeSnapshotRef": {"namespace": NS, "name": name, "uid": uid}},
        "status": {"creationTime": 1893456000000000000} if cut else {},
    }


async def test_the_watches_tell_the_follower_of_its_snapshot_and_content_only() -> None:
    watch = SnapshotWatch()
    followed = watch.follow(NS, "ws-save-1")
    raw = _snapshot("ws-save-1", "u1")
    await _event("save_snapshot_event", watch, "ADDED", raw)
    await _event("save_snapshot_event", watch, "ADDED", _snapshot("ws-save-2", "u2"))
    await _event("snapshot_content_event", watch, "ADDED", _content("ws-save-2", "u2", True))
    assert await followed.changed(0)
    assert not await followed.changed(0)  # the others were passed over
    assert followed.snapshot == raw
    assert followed.snapshot is not raw  # copied out of kopf's body
    assert not content_cut(followed.content, followed.snapshot)

    await _event("snapshot_content_event", watch, "MODIFIED", _content("ws-save-1", "u1", True))
    assert await followed.changed(0)
    assert content_cut(followed.content, followed.snapshot)

    await _event("save_snapshot_event", watch, "DELETED", raw)
    assert await followed.changed(0)
    assert followed.gone


async def test_a_snapshot_no_longer_followed_is_passed_over() -> None:
    watch = SnapshotWatch()
    followed = watch.follow(NS, "ws-save-1")
    watch.forget(NS, "ws-save-1")
    await _event("save_snapshot_event", watch, "MODIFIED", _snapshot("ws-save-1", "u1"))
    assert not await followed.changed(0)
    assert followed.snapshot is None
