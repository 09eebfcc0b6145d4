"""The periodic recheck of Actors' conditions (helmr.operator.mirror.actor_acceptance):
the leader's task that replaced a kopf timer (whose finalizer blocked deleting
Actors while no operator ran). Every Actor is checked again (whether its disks
can be saved can change alone), the nodes read only for ``imagePullPolicy:
Never`` ones; one Actor failing leaves the others checked; a failing pass never
ends it."""

from __future__ import annotations

import asyncio
from typing import Any

from helmr.operator.disks.save_support import SaveSupport
from helmr.operator.mirror.actor_acceptance import ActorRecheck, NodeImages
from helmr.resources import Actor, ActorStatus, Resource

from .stub_kube import StubKube

IMAGE = "helmr.local/runner:dev"


class NodesKube(StubKube):
    """Nodes whose images the test sets; the first ``failures`` reads of them fail
    as a lost connection does; ``written`` is set by each status write."""

    def __init__(self, nodes: NodeImages, failures: int = 0) -> None:
        super().__init__()
        self.nodes = nodes
        self.node_reads = 0
        self.failures = failures
        self.written = asyncio.Event()

    async def node_images(self) -> NodeImages:
        self.node_reads += 1
        if self.node_reads <= self.failures:
            raise ConnectionError("apiserver unreachable")
        return self.nodes

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        written = await super().patch_resource_status(kind, namespace, name, status)
        self.written.set()
        return written


def _recheck(kube: StubKube) -> ActorRecheck:
    return ActorRecheck(kube, SaveSupport(kube))


def actor(name: str, policy: str = "Never", status: dict[str, Any] | None = None) -> Actor:
    manifest: dict[str, Any] = {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Actor",
        "metadata": {"name": name, "namespace": "ns", "generation": 1},
        "spec": {"image": IMAGE, "entrypoint": "echo.echo:echo", "imagePullPolicy": policy},
    }
    if status is not None:
        manifest["status"] = status
    return Actor.from_manifest(manifest)


def reason(kube: StubKube, name: str) -> str | None:
    status = kube.statuses.get(("Actor", name))
    if status is None:
        return None
    assert isinstance(status, ActorStatus)
    [condition] = [c for c in status.conditions or [] if c.type == "Accepted"]
    return condition.reason


async def test_every_actor_is_checked_again_and_the_nodes_read_once_for_those_needing_them() -> (
    None
):
    kube = NodesKube({"n1": [[IMAGE]]})
    recheck = _recheck(kube)
    recheck.seen(None, actor("never"))
    recheck.seen("ADDED", actor("pulled", policy="IfNotPresent"))
    await recheck.recheck()
    assert reason(kube, "never") == "ImagePresent"
    assert reason(kube, "pulled") == "Valid"
    assert kube.node_reads == 1
    kube.statuses.clear()
    recheck.seen("MODIFIED", actor("never", policy="IfNotPresent"))
    await recheck.recheck()
    assert set(kube.statuses) == {("Actor", "never"), ("Actor", "pulled")}
    assert kube.node_reads == 1  # no Actor needs them now


async def test_the_nodes_are_read_once_per_pass_and_one_failing_actor_stops_no_other() -> None:
    kube = NodesKube({"n1": [["other:1"]]})
    recheck = _recheck(kube)
    for name in ("a", "broken", "c"):
        recheck.seen("ADDED", actor(name))
    kube.failing.add("broken")
    await recheck.recheck()
    assert kube.log == ["Actor/a", "Actor/c"]
    assert reason(kube, "c") == "ImageNotPresent"
    assert kube.node_reads == 1


async def test_deleted_actors_are_dropped() -> None:
    kube = NodesKube({"n1": [[IMAGE]]})
    recheck = _recheck(kube)
    recheck.seen("ADDED", actor("gone"))
    recheck.seen("DELETED", actor("gone"))
    await recheck.recheck()
    assert kube.statuses == {}
    assert (kube.node_reads, kube.class_reads) == (0, 0)  # nothing to check, nothing read


async def test_an_unchanged_condition_is_not_written_again() -> None:
    kube = NodesKube({"n1": [[IMAGE]]})
    recheck = _recheck(kube)
    recheck.seen("ADDED", actor("a"))
    await recheck.recheck()
    written = kube.statuses[("Actor", "a")].status_patch()["status"]
    recheck.seen("MODIFIED", actor("a", status=written))
    kube.log.clear()
    await recheck.recheck()
    assert kube.log == []


async def test_a_failed_pass_is_retried_at_the_next_interval() -> None:
    kube = NodesKube({"n1": [[IMAGE]]}, failures=2)
    recheck = ActorRecheck(kube, SaveSupport(kube), interval=0.01)
    recheck.seen("ADDED", actor("a"))
    task = asyncio.create_task(recheck.run())
    try:
        await asyncio.wait_for(kube.written.wait(), timeout=5)
    finally:
        task.cancel()
    assert kube.node_reads == 3  # two failed passes, then the one that wrote
    assert reason(kube, "a") == "ImagePresent"
