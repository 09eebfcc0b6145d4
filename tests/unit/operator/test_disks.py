"""The disk keeper's passes over a stub of the operator's Kube wrapper: saves become
snapshots and commit when ready, failed attempts are counted once and backed off,
and a lost disk is replaced by one restored from the last ready save."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any, TypeVar

import pytest
from kubernetes.client.exceptions import ApiException

from helmr.control import ControlConfig
from helmr.control.control import Control
from helmr.errors import Conflict, ReceiveTimeout
from helmr.kube.client import HELD_POLICY, ClassRef
from helmr.kube.errors import KubeError, translated
from helmr.operator.at_once import AT_ONCE
from helmr.operator.disks.backend import DiskInTheWay, RestoreFailed
from helmr.operator.disks.manifests import build_workspace
from helmr.operator.disks.workspaces import Disks
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Actor, Resource, Workspace
from helmr.store.rows import SaveRow
from tests.unit.control.harness import Harness

from .stub_kube import DRIVER, StubKube, terminating

R = TypeVar("R", bound=Resource[Any, Any])
NS = "team"


class DiskKube(StubKube):
    """Claims, snapshots and Helmr resources held in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.resources: dict[tuple[str, str], dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, dict[str, Any]] = {}
        self.snapshot_reads = 0
        self.created_snapshots: list[str] = []
        self.cut_at_once = True
        self.ready_at_once = False

    async def get_resource(self, kind: type[R], namespace: str, name: str) -> R | None:
        obj = self.resources.get((kind.KIND, name))
        return None if obj is None else kind.from_manifest(obj)

    async def create_resource(self, resource: R) -> R | None:
        manifest = resource.to_manifest()
        manifest["metadata"]["uid"] = f"uid-{resource.metadata.name}"
        self.resources[(resource.KIND, str(resource.metadata.name))] = manifest
        return type(resource).from_manifest(manifest)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.claims.get(name)

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> None:
        self.claims[body["metadata"]["name"]] = body

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        other_than = selector.rsplit("!=", 1)[1]
        return [
            name
            for name, c in self.claims.items()
            if c["metadata"]["labels"]["helmr.dev/disk"] != other_than
        ]

    async def delete_claim(self, namespace: str, name: str) -> None:
        self.claims.pop(name, None)

    async def get_snapshot(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.snapshot_reads += 1
        return self.snapshots.get(name)

    async def get_snapshot_content(self, name: str) -> dict[str, Any] | None:
        self.snapshot_reads += 1
        return self.contents.get(name)

    async def create_snapshot(self, namespace: str, body: dict[str, Any]) -> None:
        if body["metadata"]["name"] in self.snapshots:
            return  # as Kube's: one that exists is answered as made, and left as it is
        self.created_snapshots.append(body["metadata"]["name"])
        # Cut at once, as by a constant-time driver; ready when a test says so.
        cut: dict[str, Any] = {"creationTime": "2030-01-01T00:00:00Z"} if self.cut_at_once else {}
        if self.ready_at_once:  # as the local driver: cut and ready in one status update
            cut["readyToUse"] = True
        self.snapshots[body["metadata"]["name"]] = {**body, "status": cut}

    async def delete_snapshot(self, namespace: str, name: str) -> None:
        # As with the snapshot controller's finalizers: gone only once it lets go.
        if name in self.snapshots:
            self.snapshots[name]["metadata"]["deletionTimestamp"] = "now"

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        obj = self.resources.get((kind.KIND, name))
        if obj is None:
            return False
        obj["status"] = {**obj.get("status", {}), **status.status_patch()["status"]}
        obj["status"] = {k: v for k, v in obj["status"].items() if v is not None}
        return await super().patch_resource_status(kind, namespace, name, status)

    async def delete_resource(self, kind: type[R], namespace: str, name: str) -> None:
        held_by = self.resources.get((kind.KIND, name), {}).get("status", {}).get("heldBy")
        if kind is Workspace and held_by:
            raise held_refusal(name, held_by)
        self.resources.pop((kind.KIND, name), None)


def held_refusal(name: str, held_by: str) -> KubeError:
    """The apiserver's answer to deleting a Workspace whose status names a holder
    (charts/helmr/policies/workspace-deletion.yaml)."""
    error = ApiException(status=403, reason="Forbidden")
    message = (
        f'workspaces.helmr.dev "{name}" is forbidden: ValidatingAdmissionPolicy'
        f" '{HELD_POLICY}' with binding '{HELD_POLICY}' denied request:"
        f" workspace {name} is held by Session {held_by}: close or cancel the Session"
    )
    error.body = json.dumps({"kind": "Status", "message": message, "reason": "Forbidden"})
    return translated(error)


K = TypeVar("K", bound=DiskKube)


def _with_actor(kube: K) -> K:
    """``kube`` holding the Actor ``files`` the tests' Sessions run."""
    kube.resources[("Actor", "files")] = {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Actor",
        "metadata": {"name": "files", "namespace": NS},
        "spec": {"image": "runner:dev", "entrypoint": "files:files", "computer": {}},
    }
    return kube


@pytest.fixture
def kube() -> DiskKube:
    return _with_actor(DiskKube())


def unwatched_disks(h: Harness, kube: DiskKube) -> Disks:
    """The disk keeper over ``kube``, which has no watch: a snapshot just taken is
    read at once (as when the watch tells nothing), unless a test feeds the
    watch's events itself."""
    disks = Disks(h.control, kube, OperatorMetrics())
    disks.unwatched_read_first = 0.005
    return disks


@pytest.fixture
async def disks(h: Harness, kube: DiskKube) -> AsyncIterator[Disks]:
    disks = unwatched_disks(h, kube)
    yield disks
    await disks.close()


async def _session_with_a_completed_turn(control: Control, disks: Disks, kube: DiskKube) -> str:
    """A session whose first run (its disk prepared, as the supervisor does) completed a Turn."""
    session_id, _ = await _completed_first_turn(control, disks, kube)
    return session_id


async def _completed_first_turn(
    control: Control, disks: Disks, kube: DiskKube, name: str = "s", workspace: str = "ws"
) -> tuple[str, str]:
    """A new Session's first run completed a Turn: the Session's id and the Turn's."""
    session = await control.open_session(
        namespace=NS, name=name, actor="files", workspace=workspace
    )
    await disks.prepare(session, await _actor(kube))
    epoch = await control.process_started(session.id)
    await control.enqueue(session.id, "write")
    turn = await control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    await control.complete(session.id, epoch, turn.id)
    return session.id, turn.id


async def reconciled(disks: Disks) -> None:
    """A pass, and the snapshots it took followed until cut (the stub cuts them at
    once): the passes leave a Workspace alone while its new snapshot is followed."""
    await disks.reconcile()
    await asyncio.gather(*disks._cutting.values())


def cuts_observed(disks: Disks) -> float:
    """How many save cuts the operator's ``save_cut`` histogram has observed."""
    [metric] = disks.metrics.save_cut.collect()
    [count] = [m for m in metric.samples if m.name.endswith("_count")]
    return count.value


async def _actor(kube: DiskKube) -> Actor:
    actor = await kube.get_resource(Actor, NS, "files")
    assert actor is not None
    return actor


class ReadsAtOnceKube(DiskKube):
    """Its reads of the Workspace and the claims each let the loop run before they
    answer, counting how many were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0

    @contextlib.asynccontextmanager
    async def _reading(self) -> AsyncIterator[None]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # as a round trip would: another read may go out
            yield
        finally:
            self.in_flight -= 1

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        async with self._reading():
            return await super().get_claim(namespace, name)

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        async with self._reading():
            return await super().list_claims(namespace, selector)


async def test_a_woken_sessions_disk_is_read_with_its_older_claims_at_once(h: Harness) -> None:
    kube = _with_actor(ReadsAtOnceKube())
    disks = unwatched_disks(h, kube)
    try:
        session_id = await _session_with_a_completed_turn(h.control, disks, kube)
        kube.most_in_flight = 0

        prepared = await disks.prepare(await h.control.get_session(session_id), await _actor(kube))
    finally:
        await disks.close()

    assert prepared.claim == "ws-disk-1"
    assert kube.most_in_flight == 2


async def test_the_first_run_makes_the_workspace_and_an_empty_disk(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    session = await h.control.open_session(namespace=NS, name="s", actor="files", workspace="ws")
    claim = (await disks.prepare(session, await _actor(kube))).claim
    assert claim == "ws-disk-1"
    assert ("Workspace", "ws") in kube.resources
    assert "dataSource" not in kube.claims["ws-disk-1"]["spec"]
    [owner] = kube.claims["ws-disk-1"]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Workspace", "uid-ws")


async def test_a_pending_save_becomes_a_snapshot_and_commits_once_ready(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    await _session_with_a_completed_turn(h.control, disks, kube)

    await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1"]
    assert kube.snapshots["ws-save-1"]["spec"]["source"] == {
        "persistentVolumeClaimName": "ws-disk-1"
    }
    await reconciled(disks)  # not ready yet: nothing changes
    assert (await h.control.get_workspace(NS, "ws")).computer_version is None

    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    view = await h.control.get_workspace(NS, "ws")
    assert (view.computer_version, view.pending_saves) == ("ws-save-1", 0)
    assert kube.created_snapshots == ["ws-save-1"]


async def test_a_failed_attempt_counts_once_and_is_retried_after_a_backoff(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"error": {"message": "no space"}}

    for _ in range(3):  # the failed snapshot is being deleted: one attempt, not three
        await reconciled(disks)
    [save] = await h.control.saves_to_step()
    assert (save.attempts, save.error) == (1, "no space")

    del kube.snapshots["ws-save-1"]  # gone now; the backoff still holds the next attempt
    await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1"]
    disks._retry_at.clear()  # the backoff elapsed
    await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1", "ws-save-1"]


class TerminatingKube(DiskKube):
    """Its namespace is being deleted: the apiserver refuses every new snapshot."""

    async def create_snapshot(self, namespace: str, body: dict[str, Any]) -> None:
        raise terminating(namespace)


async def test_a_save_in_a_namespace_being_deleted_fails_its_attempts_and_is_given_up(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    kube = _with_actor(TerminatingKube())
    disks = unwatched_disks(h, kube)
    ended: list[SaveRow] = []
    disks.save_ended = ended.append
    await _session_with_a_completed_turn(h.control, disks, kube)
    for _ in range(ControlConfig().max_save_attempts):
        disks._retry_at.clear()  # each backoff elapsed
        await reconciled(disks)
    assert await h.control.saves_to_step() == []
    [save] = ended
    assert (save.status, save.attempts) == ("failed", ControlConfig().max_save_attempts)
    assert save.error == "its namespace is being deleted"
    # Each attempt is a line that says so, not a step failing with its traceback.
    assert not [r for r in caplog.records if r.exc_info]


async def _complete_another(control: Control, session_id: str) -> None:
    session = await control.get_session(session_id)
    await control.enqueue(session_id, "write more")
    # Once the save of the Turn before is cut (Disks follows its snapshot).
    turn = await control.receive(session_id, session.process_epoch, timeout=5)
    assert turn is not None
    await control.complete(session_id, session.process_epoch, turn.id)


async def test_the_next_turn_runs_once_the_snapshot_of_its_predecessors_save_is_cut(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """Not before its creationTime is set (the cut), and not later: the snapshot
    is followed closely, not at the passes' pace, and need not be ready."""
    kube.cut_at_once = False
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await disks.reconcile()
    assert kube.created_snapshots == ["ws-save-1"]
    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.enqueue(session_id, "next")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0.2)

    kube.snapshots["ws-save-1"]["status"] = {"creationTime": "2030-01-01T00:00:00Z"}
    turn = await h.control.receive(session_id, epoch, timeout=5)  # no pass in between
    assert turn is not None
    assert turn.status == "running"
    assert cuts_observed(disks) == 1
    assert [s.status for s in await h.control.saves_to_step()] == ["pending"]  # not ready


def _content(snapshot: dict[str, Any], uid: str, cut: bool) -> dict[str, Any]:
    """A VolumeSnapshotContent naming ``snapshot`` and the uid ``uid``, as the
    snapshot controller makes it and the CSI snapshotter writes its status."""
    meta = snapshot["metadata"]
    return {
        "metadata": {"name": f"snapcontent-{uid}"},
        "spec": {
            "volumeSnapshotRef": {"namespace": NS, "name": meta["name"], "uid": uid},
        },
        "status": {"creationTime": 1893456000000000000, "readyToUse": True} if cut else {},
    }


async def test_the_cut_is_read_off_the_snapshots_content_before_its_own_status_says_it(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """The snapshot controller copies the content's creationTime to the snapshot
    seconds later: the next Turn runs once the content says it, and a content
    naming another snapshot of that name (another uid) says nothing."""
    kube.cut_at_once = False
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await disks.reconcile()
    snapshot = kube.snapshots["ws-save-1"]
    snapshot["metadata"]["uid"] = "u1"
    kube.contents["snapcontent-u1"] = _content(snapshot, "u0", cut=True)  # another's
    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.enqueue(session_id, "next")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0.3)

    kube.contents["snapcontent-u1"] = _content(snapshot, "u1", cut=False)
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0.3)
    kube.contents["snapcontent-u1"] = _content(snapshot, "u1", cut=True)
    assert await h.control.receive(session_id, epoch, timeout=5) is not None
    assert [s.cut_at is not None for s in await h.control.saves_to_step()] == [True]

    # Followed on until its own status says it (ready, here): committed then, the
    # cut counted once.
    snapshot["status"] = {"creationTime": "2030-01-01T00:00:00Z", "readyToUse": True}
    await asyncio.gather(*disks._cutting.values())
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-1"
    assert cuts_observed(disks) == 1


async def test_the_watch_tells_the_cut_and_the_readiness_with_no_read_of_the_snapshot(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """kopf's watches of snapshots and contents tell the follower each change: the
    next Turn runs once the content says the cut, and the save commits once the
    snapshot says it is ready, with no GET of either (the 0.25 s reads were a third
    of the apiserver's requests under test_turn_stress.py)."""
    kube.cut_at_once = False
    disks.unwatched_read_first = 60.0  # the watch works
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await disks.reconcile()
    reads = kube.snapshot_reads  # the pass's, before it took the save
    snapshot = {**kube.snapshots["ws-save-1"], "metadata": {"namespace": NS, "uid": "u1"}}
    snapshot["metadata"]["name"] = "ws-save-1"
    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.enqueue(session_id, "next")

    disks.snapshots.snapshot_event("ADDED", snapshot)
    disks.snapshots.content_event("ADDED", _content(snapshot, "u1", cut=False))
    disks.snapshots.content_event(
        "ADDED", _content({"metadata": {"name": "other"}}, "u2", cut=True)
    )
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0.2)
    disks.snapshots.content_event("MODIFIED", _content(snapshot, "u1", cut=True))
    assert await h.control.receive(session_id, epoch, timeout=5) is not None

    ready = {**snapshot, "status": {"creationTime": "2030-01-01T00:00:00Z", "readyToUse": True}}
    disks.snapshots.snapshot_event("MODIFIED", ready)
    await asyncio.gather(*disks._cutting.values())
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-1"
    assert kube.snapshot_reads == reads


async def test_a_save_never_taken_is_created_with_no_read_of_its_snapshot(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A save is marked taken before its snapshot is made, so one never taken has
    none to look for: the GET before it was made was in the wait of its Session's
    next Turn, on every save (issue 28)."""
    disks.unwatched_read_first = 60.0  # the watch works
    await _session_with_a_completed_turn(h.control, disks, kube)
    await disks.reconcile()
    assert (kube.created_snapshots, kube.snapshot_reads) == (["ws-save-1"], 0)


async def _until(done: Callable[[], bool]) -> None:
    """Yields to the loop until ``done()`` (at most a few seconds)."""
    for _ in range(500):
        if done():
            return
        await asyncio.sleep(0.01)


async def test_a_wake_takes_the_save_asked_for_with_no_pass_and_leaves_taken_ones_to_the_passes(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A Turn's end wakes the disks (the store changed): its save is taken then, not
    at the supervisor's next pass; a Workspace with a save taken already is the
    passes' to follow (a wake comes with every change, a pass once a second)."""
    running = asyncio.create_task(disks.run())
    try:
        session_id = await _session_with_a_completed_turn(h.control, disks, kube)
        disks.wake({session_id})
        await _until(lambda: bool(kube.created_snapshots))
        assert kube.created_snapshots == ["ws-save-1"]
        await asyncio.gather(*disks._cutting.values())  # cut (not ready)

        await _complete_another(h.control, session_id)  # save 2, while save 1 is taken
        reads = kube.snapshot_reads
        await disks.reconcile(woken={session_id})  # what a wake does
        assert (kube.created_snapshots, kube.snapshot_reads) == (["ws-save-1"], reads)
        await disks.reconcile()  # a pass reads save 1's snapshot
        assert kube.snapshot_reads == reads + 1
    finally:
        running.cancel()


async def test_a_wake_reads_nothing_of_a_save_refused_lately(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A save its take refused lately (not at its Turn's end, or not due under the
    save policy) is asked again after a while by the passes, not at every change
    of the store; a newer save is taken at once."""
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    [save] = await h.control.saves_to_step()
    far = asyncio.get_running_loop().time() + 60
    disks._not_now[(NS, "ws")] = (save.version, far)  # as a refused take leaves it
    await disks.reconcile(woken={session_id})  # what a wake does
    assert (kube.snapshot_reads, kube.created_snapshots) == (0, [])
    disks._not_now[(NS, "ws")] = (save.version - 1, far)  # an older one was refused
    await disks.reconcile(woken={session_id})
    assert kube.created_snapshots == ["ws-save-1"]


async def test_a_save_not_due_under_the_policy_is_not_asked_for_until_its_process_ends(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """Under a save policy of one save per interval, a Turn's save within the interval
    is not asked for, by a wake or a pass: its take would be refused, a write
    transaction with every Turn's end. Its Session's process ending makes it due
    (a disk is saved as its process ends), and the next wake takes it."""
    taken: list[int] = []
    take = h.control.take_save

    async def take_save(namespace: str, workspace: str, version: int) -> list[SaveRow] | None:
        taken.append(version)
        return await take(namespace, workspace, version)

    disks.control.take_save = take_save
    kube.resources[("Actor", "files")]["spec"]["computer"] = {"saveIntervalSeconds": 3600}
    session_id, _ = await _completed_first_turn(h.control, disks, kube)
    await reconciled(disks)  # the first save: none was cut before, so due
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await disks.reconcile()
    assert (taken, kube.created_snapshots) == ([1], ["ws-save-1"])
    epoch = (await h.control.get_session(session_id)).process_epoch
    assert epoch is not None
    for n in range(3):
        await h.control.enqueue(session_id, f"turn {n}")
        turn = await h.control.receive(session_id, epoch, timeout=0)
        assert turn is not None
        await h.control.complete(session_id, epoch, turn.id)
        await disks.reconcile(woken={session_id})
        await disks.reconcile()
    assert taken == [1]  # saves 2 to 4 pending, none asked for
    await h.control.process_exited(session_id, epoch, 0)
    await disks.reconcile(woken={session_id})
    assert (taken, kube.created_snapshots) == ([1, 4], ["ws-save-1", "ws-save-4"])


async def test_a_wake_reads_only_the_saves_of_the_sessions_it_names(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A wake names the Sessions a change of the store touched: it takes their
    Workspaces' saves and reads no other Workspace's (under load the store changes
    with every commit, and each wake read every Workspace's pending saves)."""
    woken, _ = await _completed_first_turn(h.control, disks, kube, "a", "ws-a")
    await _completed_first_turn(h.control, disks, kube, "b", "ws-b")
    asked = _reads_of_saves_to_step(h, disks)
    await disks.reconcile(woken={woken})
    assert (asked, kube.created_snapshots) == ([{woken}], ["ws-a-save-1"])
    await disks.reconcile(woken=set())  # a wake that names none takes none
    assert kube.created_snapshots == ["ws-a-save-1"]
    await disks.reconcile()  # a pass takes every Workspace's
    assert kube.created_snapshots == ["ws-a-save-1", "ws-b-save-1"]


async def test_passes_over_every_workspace_come_at_most_once_an_interval_and_wakes_any_time(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """The supervisor asks for a pass with each of its own, at every commit under load:
    a pass over every Workspace's saves comes at most once each ``pass_interval``; a
    wake takes the saves its Sessions asked for whenever it comes."""
    asked = _reads_of_saves_to_step(h, disks)
    disks._pass_interval = 60.0
    await _completed_first_turn(h.control, disks, kube, "a", "ws-a")
    await disks.reconcile()  # the first pass: ws-a's save taken
    assert (asked, kube.created_snapshots) == ([None], ["ws-a-save-1"])
    second, _ = await _completed_first_turn(h.control, disks, kube, "b", "ws-b")
    await disks.reconcile()  # asked again within the interval: nothing read
    assert (asked, kube.created_snapshots) == ([None], ["ws-a-save-1"])
    await disks.reconcile(woken={second})
    assert (asked, kube.created_snapshots) == ([None, {second}], ["ws-a-save-1", "ws-b-save-1"])
    disks._next_pass = 0.0  # the interval passed
    await disks.reconcile()
    assert asked == [None, {second}, None]


def _reads_of_saves_to_step(h: Harness, disks: Disks) -> list[Collection[str] | None]:
    """What each of ``disks``' reads of the saves to step names (None: every Workspace)."""
    asked: list[Collection[str] | None] = []
    read = h.control.saves_to_step

    async def saves_to_step(session_ids: Collection[str] | None = None) -> list[SaveRow]:
        asked.append(session_ids)
        return await read(session_ids)

    disks.control.saves_to_step = saves_to_step
    return asked


async def test_a_save_ready_as_it_is_cut_commits_then_and_the_next_turns_save_is_its_own(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A driver that makes a snapshot ready as it cuts it (the local one): the save
    commits when the cut is seen, not a pass later, so the Workspace has no save in
    flight when the next Turn ends and that Turn's save is cut at its own end (the
    Turn after it waits). Committed a pass later, the next Turn's save was left to
    be covered by a later one, and a loss meanwhile named that Turn in a gap."""
    kube.ready_at_once = True
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    await _complete_another(h.control, session_id)  # ran once save 1 was cut
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-1"
    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.enqueue(session_id, "third")
    with pytest.raises(ReceiveTimeout):  # waits for save 2's cut, at turn 2's end
        await h.control.receive(session_id, epoch, timeout=0)
    await reconciled(disks)
    assert await h.control.receive(session_id, epoch, timeout=5) is not None
    assert kube.created_snapshots == ["ws-save-1", "ws-save-2"]
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-2"
    assert cuts_observed(disks) == 2


async def test_one_save_of_a_workspace_is_taken_at_a_time_and_the_newest_covers_the_rest(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    ended: list[SaveRow] = []
    disks.save_ended = ended.append
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    for _ in range(3):  # completed while save 1 is being taken
        await _complete_another(h.control, session_id)
        await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1"]

    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)  # save 1 is ready
    await reconciled(disks)  # the newest is taken, for the three
    assert kube.created_snapshots == ["ws-save-1", "ws-save-4"]
    assert kube.snapshots["ws-save-4"]["metadata"]["labels"]["helmr.dev/save-version"] == "4"
    assert [s.version for s in await h.control.saves_to_step()] == [4]
    # The snapshot names the three Turns whose state it holds, its own last.
    covered = [s.turn_id for s in await h.control.covered_saves(NS, "ws", 4)]
    [own] = await h.control.saves_to_step()
    assert len(covered) == 2
    annotations = kube.snapshots["ws-save-4"]["metadata"]["annotations"]
    assert annotations == {"helmr.dev/turns": ",".join([*covered, own.turn_id])}

    kube.snapshots["ws-save-4"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-4"
    # Each Turn's save is told ended: its own snapshot, or the one that covered it.
    assert [(s.version, s.status, s.covered_by) for s in ended] == [
        (1, "ready", None),
        (4, "ready", None),
        (2, "covered", 4),
        (3, "covered", 4),
    ]
    assert all(s.ready_at is not None for s in ended)
    assert kube.created_snapshots == ["ws-save-1", "ws-save-4"]


async def test_no_turn_waits_out_the_backoff_after_a_failed_attempt(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"error": {"message": "no space"}}
    await reconciled(disks)  # failed: the Workspace backs off
    del kube.snapshots["ws-save-1"]
    await _complete_another(h.control, session_id)  # its save is to be cut
    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.enqueue(session_id, "next")
    with pytest.raises(ReceiveTimeout):
        await h.control.receive(session_id, epoch, timeout=0)
    await reconciled(disks)  # still backing off: the save is not cut now
    assert await h.control.receive(session_id, epoch, timeout=0) is not None
    assert kube.created_snapshots == ["ws-save-1"]


async def test_a_failed_attempt_is_retried_as_the_newest_save_covering_it(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    await _complete_another(h.control, session_id)
    kube.snapshots["ws-save-1"]["status"] = {"error": {"message": "no space"}}
    await reconciled(disks)
    del kube.snapshots["ws-save-1"]  # the failed attempt is gone

    await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1"]  # the Workspace's backoff holds
    disks._retry_at.clear()  # the backoff elapsed
    await reconciled(disks)
    assert kube.created_snapshots == ["ws-save-1", "ws-save-2"]
    [covered] = await h.control.covered_saves(NS, "ws", 2)
    assert (covered.version, covered.attempts, covered.error) == (1, 1, "no space")
    turns = kube.snapshots["ws-save-2"]["metadata"]["annotations"]["helmr.dev/turns"]
    assert turns.split(",")[0] == covered.turn_id


async def test_after_a_loss_the_disk_is_restored_from_the_last_ready_save(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    actor = await _actor(kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    session = await h.control.get_session(session_id)
    await h.control.execution_lost(session_id, session.process_epoch)

    claim = (await disks.prepare(await h.control.get_session(session_id), actor)).claim

    assert claim == "ws-disk-2"
    assert kube.claims["ws-disk-2"]["spec"]["dataSource"]["name"] == "ws-save-1"
    assert list(kube.claims) == ["ws-disk-2"]  # the lost disk is deleted


async def test_a_restore_whose_save_is_gone_fails(h: Harness, kube: DiskKube, disks: Disks) -> None:
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    actor = await _actor(kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    await h.control.execution_lost(session_id, 1)
    kube.snapshots.clear()

    with pytest.raises(RestoreFailed, match="ws-save-1"):
        await disks.prepare(await h.control.get_session(session_id), actor)


async def test_a_workspace_deleted_outside_helmr_starts_again_on_an_empty_disk(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    await h.control.execution_lost(session_id, 1)
    # `kubectl delete workspace ws`: its claims and saves go with it.
    del kube.resources[("Workspace", "ws")]
    kube.claims.clear()
    kube.snapshots.clear()

    claim = (await disks.prepare(await h.control.get_session(session_id), await _actor(kube))).claim

    assert claim == "ws-disk-1"
    assert "dataSource" not in kube.claims["ws-disk-1"]["spec"]
    assert (await h.control.get_workspace(NS, "ws")).computer_version is None


async def test_a_snapshot_left_by_an_earlier_workspace_of_the_same_name_is_never_its_save(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """A Workspace deleted and made again before its snapshots were collected: the
    new one's save 1 has the old one's ``ws-save-1`` name. That snapshot, ready with
    the old disk's files, names another Turn: it is deleted, not followed, and the
    save is taken again once it is gone."""
    session_id = await _session_with_a_completed_turn(h.control, disks, kube)
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    await h.control.close(session_id)
    await h.control.process_exited(session_id, 1, 0)
    del kube.resources[("Workspace", "ws")]  # `kubectl delete workspace ws`
    kube.claims.clear()  # collected; its snapshot not yet
    old = kube.snapshots["ws-save-1"]

    _, turn_id = await _completed_first_turn(h.control, disks, kube, name="s2")

    await reconciled(disks)
    await reconciled(disks)
    assert (await h.control.get_workspace(NS, "ws")).computer_version is None
    assert old["metadata"].get("deletionTimestamp")
    del kube.snapshots["ws-save-1"]  # gone
    await reconciled(disks)
    labels = kube.snapshots["ws-save-1"]["metadata"]["labels"]
    assert labels["helmr.dev/turn-id"] == turn_id
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True}
    await reconciled(disks)
    assert (await h.control.get_workspace(NS, "ws")).computer_version == "ws-save-1"


async def test_a_claim_left_by_an_earlier_workspace_of_the_same_name_is_never_mounted(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """Its claim ``ws-disk-1`` not yet collected, a Workspace deleted and made again
    would have its new first disk be the old one's files: that claim is deleted,
    the disk is not prepared until it is gone, and then it is made empty."""
    session = await h.control.open_session(namespace=NS, name="s", actor="files", workspace="ws")
    kube.claims["ws-disk-1"] = {
        "metadata": {
            "name": "ws-disk-1",
            "labels": {"helmr.dev/workspace": "ws", "helmr.dev/disk": "1"},
            "ownerReferences": [{"kind": "Workspace", "name": "ws", "uid": "uid-earlier"}],
        },
        "spec": {"dataSource": {"kind": "VolumeSnapshot", "name": "ws-save-9"}},
    }

    with pytest.raises(DiskInTheWay, match="earlier Workspace"):
        await disks.prepare(session, await _actor(kube))
    assert "ws-disk-1" not in kube.claims  # deleted (the stub's deletion is at once)

    claim = (await disks.prepare(session, await _actor(kube))).claim
    made = kube.claims[claim]
    assert "dataSource" not in made["spec"]
    [owner] = made["metadata"]["ownerReferences"]
    assert owner["uid"] == "uid-ws"


async def test_a_prepared_disk_stores_its_usage_thresholds_with_the_workspaces_overrides(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    kube.resources[("Actor", "files")]["spec"]["computer"] = {"size": "20Mi", "pauseAt": 0.5}
    kube.resources[("Workspace", "ws")] = {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "ws", "namespace": NS, "uid": "uid-ws"},
        "spec": {"stopAt": 0.75, "usageIntervalSeconds": 1},
    }
    session = await h.control.open_session(namespace=NS, name="s", actor="files", workspace="ws")

    prepared = await disks.prepare(session, await _actor(kube))

    limits = prepared.usage.limits
    assert (limits.capacity_bytes, limits.pause_at, limits.stop_at, limits.resolve_at) == (
        20 << 20,
        0.5,  # the Actor's
        0.75,  # the Workspace's
        0.85,  # the default
    )
    assert prepared.usage.interval_seconds == 1
    # The store measures the runner's reports against them.
    epoch = await h.control.process_started(session.id)
    assert await h.control.report_storage(session.id, epoch, 11 << 20) == "paused"


class GatedSnapshotCreations(DiskKube):
    """Snapshot creations (each step's last call) that count how many are under way
    at once, the first ``together`` of them each waiting until all are (so a step
    beyond the limit would be under way with them), for at most ``wait`` seconds;
    creations for the Workspace ``broken`` raise."""

    def __init__(self, broken: str, together: int, wait: float = 5.0) -> None:
        super().__init__()
        self.broken = broken
        self.together = together
        self.wait = wait
        self.all_under_way = asyncio.Event()
        self.under_way = 0
        self.most_under_way = 0

    async def create_snapshot(self, namespace: str, body: dict[str, Any]) -> None:
        self.under_way += 1
        self.most_under_way = max(self.most_under_way, self.under_way)
        if self.under_way >= self.together:
            self.all_under_way.set()
        try:
            # Fewer at once than ``together``: the wait ends, and the count says so.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_under_way.wait(), self.wait)
            if body["metadata"]["name"].startswith(f"{self.broken}-save-"):
                raise RuntimeError("apiserver said no")
            return await super().create_snapshot(namespace, body)
        finally:
            self.under_way -= 1


async def test_workspaces_take_their_save_steps_a_few_at_once_and_one_failing_stalls_none(
    h: Harness,
) -> None:
    count = AT_ONCE + 4
    kube = _with_actor(GatedSnapshotCreations(broken="ws-0", together=AT_ONCE))
    disks = unwatched_disks(h, kube)
    for i in range(count):
        await _completed_first_turn(h.control, disks, kube, name=f"s{i}", workspace=f"ws-{i}")

    await reconciled(disks)

    assert kube.most_under_way == AT_ONCE
    assert sorted(kube.created_snapshots) == sorted(f"ws-{i}-save-1" for i in range(1, count))


async def _released(h: Harness, kube: DiskKube, disks: Disks) -> str:
    """A Session that held Workspace ws (its status says so) and closed in the store."""
    session = await h.control.open_session(namespace=NS, name="s", actor="files", workspace="ws")
    await disks.prepare(session, await _actor(kube))
    await disks.sync_status(NS, "ws")
    assert kube.resources[("Workspace", "ws")]["status"]["heldBy"] == "s"
    await h.control.close(session.id)
    assert (await h.control.get_session(session.id)).status == "closed"
    return session.id


def _after_status_writes(kube: DiskKube, then: Callable[[], Awaitable[str]]) -> None:
    """Each Workspace status write is followed by ``then``, which says the holder
    written over it (as another writer would)."""
    patch = kube.patch_resource_status

    async def patched(kind: Any, namespace: str, name: str, status: Any) -> bool:
        written = await patch(kind, namespace, name, status)
        kube.resources[("Workspace", "ws")]["status"]["heldBy"] = await then()
        return written

    kube.patch_resource_status = patched  # type: ignore[method-assign]


async def test_a_workspace_its_session_just_let_go_of_is_deleted_though_its_status_lags(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """Issue 25, item 5: the Session reads closed before the status mirror clears the
    Workspace's holder, which the admission policy refuses to delete: the deletion
    writes the status from the store first."""
    await _released(h, kube, disks)

    await disks.delete_workspace(NS, "ws")

    assert ("Workspace", "ws") not in kube.resources


async def test_a_deletion_refused_as_held_is_a_conflict_naming_the_holder(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    await _released(h, kube, disks)

    async def stale_mirror() -> str:  # a holder the store does not know
        return "old"

    _after_status_writes(kube, stale_mirror)

    with pytest.raises(Conflict, match="held by Session old") as refused:
        await disks.delete_workspace(NS, "ws")

    assert refused.value.details == {"workspace": "ws", "held_by": "old"}
    assert ("Workspace", "ws") in kube.resources


async def test_a_deletion_refused_for_a_new_holder_names_it(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    """The store took a new holder after the API checked: its Conflict says which."""
    await _released(h, kube, disks)

    async def taken_meanwhile() -> str:
        await h.control.open_session(namespace=NS, name="t", actor="files", workspace="ws")
        return "t"

    _after_status_writes(kube, taken_meanwhile)

    with pytest.raises(Conflict, match="held by session t") as refused:
        await disks.delete_workspace(NS, "ws")

    taken = (await h.control.get_workspace(NS, "ws")).held_by
    assert refused.value.details == {"workspace": "ws", "session_id": taken, "held_by": "t"}


async def test_a_forked_workspaces_first_disk_is_restored_from_the_save_it_was_forked_from(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    source_id = await _session_with_a_completed_turn(h.control, disks, kube)
    [save] = await h.control.saves_to_step()
    done = save.turn_id
    await reconciled(disks)
    kube.snapshots["ws-save-1"]["status"] = {"readyToUse": True, "creationTime": "t"}
    await reconciled(disks)
    source = await h.control.get_session(source_id)
    forked = await h.control.fork_session(
        source_id=source.id, at_turn=done, name="f", workspace="fws"
    )
    claim = (await disks.prepare(forked, await _actor(kube))).claim
    assert claim == "fws-disk-1"
    assert kube.claims["fws-disk-1"]["spec"]["dataSource"]["name"] == "ws-save-1"
    await disks.sync_status(NS, "fws")
    status = kube.resources[("Workspace", "fws")]["status"]
    assert status["forkedFrom"] == {
        "session": source.id,
        "workspace": "ws",
        "save": "ws-save-1",
        "turn": done,
    }


@pytest.mark.parametrize(
    ("binds_at_once", "bound_before", "bound"),
    [
        (True, False, False),  # made now, its class binds it by itself: the pod waits
        (False, False, True),  # WaitForFirstConsumer: bound only for its scheduled pod
        (True, True, True),  # made by an earlier start, Bound since
    ],
)
async def test_a_disk_is_bound_for_its_pod_unless_its_class_binds_it_later(
    h: Harness, kube: DiskKube, disks: Disks, binds_at_once: bool, bound_before: bool, bound: bool
) -> None:
    kube.storage_classes = (
        ClassRef("helmr-hostpath", DRIVER, default=True, binds_at_once=binds_at_once),
    )
    session = await h.control.open_session(namespace=NS, name="s", actor="files", workspace="ws")
    if bound_before:
        await disks.prepare(session, await _actor(kube))
        kube.claims["ws-disk-1"]["status"] = {"phase": "Bound"}

    prepared = await disks.prepare(session, await _actor(kube))

    assert (prepared.claim, prepared.bound) == ("ws-disk-1", bound)


async def test_a_pooled_claim_takes_the_workspace_the_api_made_neither_made_nor_read_again(
    h: Harness, kube: DiskKube, disks: Disks
) -> None:
    # Made at the Session's start, its store state reset then: the adoption resets nothing.
    made = build_workspace(NS, "ws")
    made.metadata.uid = "uid-made-at-start"
    given = await disks.pool_disk(NS, "ws", await _actor(kube), made)
    assert given is not None
    assert (given.workspace.uid, given.disk.new_workspace) == ("uid-made-at-start", False)
    assert ("Workspace", "ws") not in kube.resources  # no POST, no GET

    unmade = await disks.pool_disk(NS, "other", await _actor(kube))
    assert unmade is not None
    assert (unmade.workspace.uid, unmade.disk.new_workspace) == ("uid-other", True)
