"""Keeps each Workspace's Computer disk in step with the store: the claim the
next runner mounts (restored from a save after an execution loss), the
VolumeSnapshots of its saves, pruning, and the Workspace's status.

A save is taken at its Turn's end, its Session's next Turn waiting until its
point in time is cut (``helmr.control.disks``): each snapshot taken is followed
through kopf's watches (:meth:`Disks._follow_cut`) until its ``creationTime``
is set.

One save of a Workspace is taken at a time. While its snapshot is not ready,
the Turns completed meanwhile each request a save; when it ends, the newest of
those is taken and covers the others (``helmr.control.disks``): a snapshot
costs the apiserver about 20 writes (ours, the snapshot controller's and the
CSI snapshotter's), so fast Turns share one.

The store decides (which disk generation, which saves, which restore point);
this module only makes the Kubernetes objects match, with deterministic
names, so a pass repeated after an operator restart changes nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from helmr.control import SessionView
from helmr.control.adoptions import AdoptedDisk
from helmr.control.disks import restore_point
from helmr.control.operator_api import OperatorControl
from helmr.errors import Conflict
from helmr.kube.client import Kube, namespace_terminating, refused_as_held
from helmr.kube.errors import Forbidden
from helmr.kube.labels import LABEL_DISK, LABEL_TURN_ID, LABEL_WORKSPACE
from helmr.operator.at_once import AT_ONCE, each_at_once
from helmr.operator.disks.backend import DiskInTheWay, RestoreFailed
from helmr.operator.disks.manifests import (
    DiskSpec,
    PoolDisk,
    PreparedDisk,
    SaveSpec,
    WorkspaceRef,
    build_claim_spec,
    build_save_spec,
    build_workspace,
    claim_bound,
    disk_usage_spec,
    owned_by_another_workspace,
    snapshot_of_turn,
)
from helmr.operator.disks.save_support import SaveSupport
from helmr.operator.disks.snapshot_cuts import (
    Followed,
    SnapshotWatch,
    content_cut,
    content_name,
    snapshot_settled,
)
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.operator.written_statuses import WrittenStatuses
from helmr.resources import Actor, ComputerSpec, Workspace, WorkspaceStatus
from helmr.resources.workspace import ForkedFrom, disk_claim, save_name
from helmr.store.rows import SaveRow

log = logging.getLogger(__name__)

DELETE_ATTEMPTS = 3
"""Deletions of a Workspace the admission policy refuses as held while the store
holds it for no Session, each after writing its status again, before the API
answers Conflict."""


UNWATCHED_READ_FIRST = 5.0
UNWATCHED_READ_MOST = 20.0
"""Seconds the watch may tell nothing of a snapshot just asked for (and its content)
before they are read all the same, growing from the first to the most: the watch
tells of each change within milliseconds, but may be reconnecting. The snapshot
controller changes a new snapshot or its content every few seconds until it is
cut (the local cluster: created, content made ~4 s later, cut at once), so a
watch that works leaves nothing to read."""
CUT_FOLLOW_SECONDS = 60.0
RETAKE_AFTER = 2.0
"""Seconds before a save whose take was refused (not at its Turn's end; or not due
under the save policy, which the read of the saves to step already leaves out but
for a change in between) is asked again, unless a newer save comes first."""


def _nobody_listens(save: SaveRow) -> None:
    return None


class Disks:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube,
        metrics: OperatorMetrics,
        *,
        pass_interval: float = 0.0,
    ) -> None:
        """``pass_interval``: the least time, in seconds, from one pass over every
        Workspace's saves to the next (:meth:`reconcile`); passes asked sooner do
        nothing. The supervisor asks for one with each of its own, and under load it
        passes at every commit: each pass read every Workspace's pending saves back to
        back. The saves a change of the store asks for are its wake's (:meth:`run`)."""
        self.control = control
        self.kube = kube
        self.metrics = metrics
        self._pass_interval = pass_interval
        self._next_pass = 0.0
        # When a Workspace whose last attempt failed may take a save again (in
        # memory: a restart retries sooner).
        self._retry_at: dict[tuple[str, str], float] = {}
        # Told of each save that ended, ready or given up (the Turns' traces).
        self.save_ended: Callable[[SaveRow], None] = _nobody_listens
        # The status last written per Workspace: the status sync asks after every
        # change of its Session (each Turn), and the status rarely changes.
        self._statuses = WrittenStatuses[tuple[str, str], WorkspaceStatus](WorkspaceStatus)
        # Whether the cluster can save a disk at all (its snapshot classes, read once a minute).
        self.save_support = SaveSupport(kube)
        # Why each Workspace's disk cannot be saved (None: it can, or may), as last
        # resolved: when a runner's disk is prepared and when a save is taken.
        self._unsaved: dict[tuple[str, str], str | None] = {}
        # The snapshots being followed until cut, by Workspace, and what kopf's
        # watches tell of them.
        self._cutting: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.snapshots = SnapshotWatch()
        self.unwatched_read_first = UNWATCHED_READ_FIRST
        # The Workspaces whose step is under way: a pass's, or a wake's (:meth:`run`).
        self._advancing: set[tuple[str, str]] = set()
        # Set when the store changed (a Turn may have ended, asking for a save), with
        # the Sessions whose commits changed it since the last wake was taken in.
        self._requested = asyncio.Event()
        self._woken: set[str] = set()
        # The newest save each Workspace's take refused lately, and until when it is
        # not asked again (in memory: a restart asks sooner).
        self._not_now: dict[tuple[str, str], tuple[int, float]] = {}

    async def prepare(self, session: SessionView, actor: Actor) -> PreparedDisk:
        """The claim the Session's next runner mounts, created if missing (from
        the restore point after an execution loss). Older disks are deleted:
        the runner that wrote them is gone. The disk's usage thresholds in force
        are stored for the Session (its disk pressure episodes)."""
        namespace, name = session.namespace, session.workspace
        # The reads go out at once, in two rounds: each is an apiserver or a store
        # round trip on the path of a woken Session's Turn (5-120 ms each, one after
        # another, on the loaded local cluster: benchmarks/results.md, 5 December).
        workspace, disk = await asyncio.gather(
            self.kube.get_resource(Workspace, namespace, name),
            self.control.current_disk(namespace, name),
        )
        if workspace is None:
            # Made now, which resets what the store knew of an older one of its
            # name: its disk is read after that.
            workspace = await self._ensure_workspace(namespace, name)
            disk = await self.control.current_disk(namespace, name)
        computer = workspace.spec.resolve(actor.spec.computer)
        claim = disk_claim(name, disk.disk, disk.first_claim)
        selector = f"{LABEL_WORKSPACE}={name},{LABEL_DISK}!={disk.disk}"
        existing, older = await asyncio.gather(
            self.kube.get_claim(namespace, claim), self.kube.list_claims(namespace, selector)
        )
        if existing is not None and owned_by_another_workspace(existing, workspace):
            await self._claim_in_the_way(namespace, claim, existing)
        if existing is None:
            restore = restore_point(name, disk)
            if restore is not None:
                await self._require_ready(namespace, restore)
            spec = DiskSpec(WorkspaceRef.of(workspace), disk.disk, computer, restore, claim)
            await self.kube.create_claim(namespace, build_claim_spec(spec))
            source = "empty" if restore is None else "restored"
            self.metrics.disks_created.labels(source).inc()
            log.info("workspace %s/%s: disk %s created", namespace, name, claim)
        for old in older:
            await self.kube.delete_claim(namespace, old)
        await self._prune(namespace, name, computer.keep_saves)
        usage = disk_usage_spec(computer)
        await self.control.set_storage_limits(session.id, usage.limits)
        why = await self._resolve_unsaved((namespace, name), computer)
        interval = timedelta(seconds=computer.save_interval_seconds)
        await self.control.align_saves(namespace, name, why is None, interval)
        bound = claim_bound(existing) or not await self.save_support.binds_at_once(computer)
        return PreparedDisk(claim, usage, bound)

    async def _claim_in_the_way(self, namespace: str, claim: str, existing: dict[str, Any]) -> None:
        """A claim of the disk's name owned by another Workspace: an earlier one of
        the same name (deleted and made again before its claims were collected).
        Never mounted, its files being that Workspace's: deleted (Helmr's, as its
        owner says), and the disk made once it is gone."""
        if not (existing.get("metadata") or {}).get("deletionTimestamp"):
            await self.kube.delete_claim(namespace, claim)
        raise DiskInTheWay(
            f"claim {claim} is an earlier Workspace's of the same name, being deleted:"
            " the disk is made once it is gone"
        )

    async def delete_workspace(self, namespace: str, name: str) -> None:
        """The API's deletion, of a Workspace the store holds for no Session (the API
        checked): the Workspace goes, its claims and saves with it.

        The admission policy refuses it while the resource's status names a
        holder, and the status mirror clears that only after the store let go (a
        client reads the Session closed first): so the status is written from the
        store before each attempt. Refused all the same (a holder written again
        meanwhile, or a new one in the store), it is a Conflict naming the holder
        (``details.held_by``), never a 500.
        """
        for _ in range(DELETE_ATTEMPTS):
            await self.sync_status(namespace, name, again=True)
            try:
                await self.kube.delete_resource(Workspace, namespace, name)
            except Forbidden as e:
                if not refused_as_held(e):
                    raise
                await self.control.require_unheld_workspace(namespace, name)
                continue
            self._statuses.forget((namespace, name))
            self._unsaved.pop((namespace, name), None)
            self._not_now.pop((namespace, name), None)
            return
        workspace = await self.kube.get_resource(Workspace, namespace, name)
        status = None if workspace is None else workspace.status
        held_by = None if status is None else status.held_by
        raise Conflict(
            f"workspace {name} is held by Session {held_by}, as its status says: close or"
            " cancel that Session and wait for its status to be closed before deleting it",
            workspace=name,
            held_by=held_by,
        )

    def wake(self, session_ids: Collection[str]) -> None:
        """The store changed those Sessions: a Turn of theirs may have ended, asking
        for a save (:meth:`run`)."""
        self._woken.update(session_ids)
        self._requested.set()

    async def run(self) -> None:
        """Takes each save asked for as soon as :meth:`wake` says one may be, not at
        the supervisor's next pass, whose steps before the saves' (runners started
        among them) made a Turn's end to its save taken 1.3-2 s under
        ``tests/cluster/test_turn_stress.py``, all waited by the Session's next Turn.
        Only the Workspaces of the Sessions woken, and of those only the ones with no
        save taken yet: following saves taken is the passes'."""
        while True:
            await self._requested.wait()
            self._requested.clear()
            woken, self._woken = self._woken, set()
            try:
                await self.reconcile(woken=woken)
            except Exception:
                log.exception("taking the saves asked for failed; the passes take them")

    async def reconcile(self, *, woken: Collection[str] | None = None) -> None:
        """Moves every Workspace's pending saves one step: follow the one being
        taken (ready, or failed and retried), else take the newest; at most once
        each ``pass_interval``. ``woken`` (a wake's, whenever asked): only the
        Workspaces these Sessions use, and of those only the ones none of whose
        pending saves was taken yet.

        A step is apiserver round trips, so Workspaces take theirs a few at once
        (``AT_ONCE``): one after another, thousands of Workspaces with a save
        pending made a pass of minutes and held up the supervisor's pass it ends
        (benchmarks/bench_scale.py kwok). Errors are isolated per Workspace: one
        Workspace's trouble stalls no other.
        """

        async def advance(namespace: str, name: str, saves: list[SaveRow]) -> None:
            try:
                await self._advance(namespace, name, saves)
            except Exception:
                log.exception("workspace %s/%s: a save failed a step; retrying", namespace, name)

        if woken is None:
            now = asyncio.get_running_loop().time()
            if now < self._next_pass:
                return
            self._next_pass = now + self._pass_interval
        pending = by_workspace(await self.control.saves_to_step(woken))
        if woken is not None:
            pending = {key: saves for key, saves in pending.items() if self._to_take(key, saves)}
        await each_at_once(
            AT_ONCE,
            (partial(advance, ns, name, saves) for (ns, name), saves in pending.items()),
        )

    def _to_take(self, key: tuple[str, str], saves: list[SaveRow]) -> bool:
        """Whether a wake moves the Workspace's saves: none was taken yet, its newest
        was not refused lately and no failed attempt backs off. A wake comes with
        every change of the store; the passes, once a second, read the rest."""
        now = asyncio.get_running_loop().time()
        refused = self._not_now.get(key)
        if refused is not None and refused[0] == saves[-1].version and now < refused[1]:
            return False
        if now < self._retry_at.get(key, 0.0):
            return False
        return all(save.taken_at is None for save in saves)

    async def sync_status(self, namespace: str, name: str, *, again: bool = False) -> None:
        """Mirrors the store's view of the Workspace into its status (if it exists),
        even when this process wrote that status last if ``again``."""
        view = await self.control.get_workspace(namespace, name)
        holder = None if view.held_by is None else await self.control.get_session(view.held_by)
        fork = view.forked_from
        status = WorkspaceStatus(
            claim_name=view.claim_name,
            computer_version=view.computer_version,
            restored_from=view.restored_from,
            pending_saves=view.pending_saves,
            held_by=None if holder is None else holder.name,
            forked_from=None
            if fork is None
            else ForkedFrom(
                session=fork.session_id, workspace=fork.workspace, save=fork.save, turn=fork.turn_id
            ),
        )
        await self._statuses.write(
            (namespace, name),
            status,
            lambda written: self.kube.patch_resource_status(Workspace, namespace, name, written),
            again=again,
        )

    async def _advance(self, namespace: str, name: str, saves: list[SaveRow]) -> None:
        """One Workspace's pending saves, oldest first, unless its step is under way
        (a pass's and a wake's at once would take its save twice) or its save just
        taken is followed (:meth:`_follow_cut`)."""
        key = (namespace, name)
        if key in self._cutting or key in self._advancing:
            return
        self._advancing.add(key)
        try:
            await self._step(key, saves)
        finally:
            self._advancing.discard(key)

    async def _step(self, key: tuple[str, str], saves: list[SaveRow]) -> None:
        """The one with a snapshot is being taken (the oldest: newer ones were
        requested after it was taken)."""
        namespace, name = key
        newest = saves[-1]
        for save in saves:
            if save.taken_at is None:
                # Never taken, so no snapshot to look for: a save is marked taken
                # before its snapshot is created (``take_save``), and an attempt that
                # failed stays marked. Not read for the newest either: that GET (13 ms
                # in a traced save) was in the wait of the Session's next Turn, on
                # every save (issue 28). A snapshot of its name left by an earlier Workspace of
                # the same name is found all the same: its creation answers that it
                # exists (``create_snapshot``), and it is followed as before.
                continue
            snapshot = await self.kube.get_snapshot(namespace, save_name(name, save.version))
            if snapshot is not None:
                await self._follow(save, snapshot)
                return
        now = asyncio.get_running_loop().time()
        if now < self._retry_at.get(key, 0.0):
            # Backing off after a failed attempt: no Turn waits out the backoff.
            await self.control.not_cut_now(namespace, name, newest.version)
            return
        self._retry_at.pop(key, None)
        refused = self._not_now.get(key)
        if refused is not None and refused[0] == newest.version and now < refused[1]:
            return  # refused lately, and no newer save since
        covered = await self.control.take_save(namespace, name, newest.version)
        if covered is None:
            # A Turn ran since its own ended (the next Turn's save covers it), or it
            # was not due after all: asked again after a while.
            self._not_now[key] = (newest.version, now + RETAKE_AFTER)
            return
        self._not_now.pop(key, None)
        if covered:
            self.metrics.saves.labels("covered").inc(len(covered))
        followed = await self._take(newest)
        if followed is not None:
            task = asyncio.create_task(self._follow_cut(newest, followed))
            self._cutting[key] = task
            task.add_done_callback(lambda _: self._cutting.pop(key, None))

    async def _follow_cut(self, save: SaveRow, followed: Followed) -> None:
        """Follows the snapshot just asked for as the watch tells of it, until its
        point in time is cut (its Session's next Turn waits for that), it failed,
        or it is gone; the passes leave its Workspace alone meanwhile. The cut is
        read off the snapshot's content, seconds before the snapshot's own status
        says it (:mod:`helmr.operator.disks.snapshot_cuts`); the snapshot is followed
        on until its status says it too. A snapshot ready as it is cut (the local
        driver's, and many others') commits then: the Workspace has no save in
        flight when its Session's next Turn ends, so that Turn's save is cut at its
        own end too. Readiness that comes later is the passes' to follow, as is
        everything after ``CUT_FOLLOW_SECONDS``."""
        namespace, name = save.namespace, save.workspace
        snapshot_name = save_name(name, save.version)
        loop = asyncio.get_running_loop()
        give_up, unwatched = loop.time() + CUT_FOLLOW_SECONDS, self.unwatched_read_first
        try:
            while (left := give_up - loop.time()) > 0:
                if not await followed.changed(min(unwatched, left)):
                    await self._read(followed, namespace, snapshot_name)
                    unwatched = min(unwatched * 2, UNWATCHED_READ_MOST)
                snapshot = followed.snapshot
                if followed.gone:
                    return
                if snapshot is None:
                    continue
                if snapshot_settled(snapshot) or not snapshot_of_turn(
                    snapshot, save.session_id, save.turn_id
                ):
                    await self._follow(save, snapshot)
                    return
                if save.cut_at is None and content_cut(followed.content, snapshot):
                    save = await self._cut(save)
        except Exception:
            log.exception("workspace %s/%s: following save %d", namespace, name, save.version)
        finally:
            self.snapshots.forget(namespace, snapshot_name)

    async def _read(self, followed: Followed, namespace: str, name: str) -> None:
        """Reads the followed snapshot, and its content while it is not cut: the
        watch told nothing of them for a while."""
        snapshot = await self.kube.get_snapshot(namespace, name)
        if snapshot is None:
            followed.gone = True
            return
        followed.snapshot = snapshot
        content = content_name(snapshot)
        if content is not None and not snapshot_settled(snapshot):
            followed.content = await self.kube.get_snapshot_content(content)

    async def _cut(self, save: SaveRow) -> SaveRow:
        """The save's snapshot is cut: recorded once, whoever saw it; the save as it
        is now (as given if it was cut before)."""
        cut = await self.control.save_cut(save.namespace, save.workspace, save.version)
        self._observe_cut(cut)
        return save if cut is None else cut

    def _observe_cut(self, cut: SaveRow | None) -> None:
        if cut is not None and cut.cut_at is not None:
            self.metrics.save_cut.observe((cut.cut_at - cut.requested_at).total_seconds())

    async def close(self) -> None:
        """Stops following snapshots (the passes follow them, in this process or the next)."""
        for task in list(self._cutting.values()):
            task.cancel()
        await asyncio.gather(*self._cutting.values(), return_exceptions=True)

    async def _follow(self, save: SaveRow, snapshot: dict[str, Any]) -> None:
        """The save being taken: ready, cut, failed (deleted, to be taken again), or
        still going."""
        namespace, name, version = save.namespace, save.workspace, save.version
        if (snapshot.get("metadata") or {}).get("deletionTimestamp"):
            return  # a failed attempt going away; the next one starts once it is gone
        if not snapshot_of_turn(snapshot, save.session_id, save.turn_id):
            await self._in_the_way(save, snapshot)
            return
        status = snapshot.get("status") or {}
        if status.get("readyToUse"):
            await self._ready(save)
            return
        if status.get("creationTime") and save.cut_at is None:
            await self._cut(save)
        if status.get("error"):
            message = str((status["error"] or {}).get("message") or "snapshot failed")
            # Deleted first, so the next attempt starts over and a given-up save leaves nothing.
            await self.kube.delete_snapshot(namespace, save_name(name, version))
            await self._attempt_failed(save, message)

    async def _ready(self, save: SaveRow) -> None:
        """The save's snapshot is ready: committed, and cut with it if it was not
        before (one transaction, so the Workspace has no save in flight by the time
        its Session's next Turn can run and end); older saves beyond the policy pruned."""
        namespace, name = save.namespace, save.workspace
        ready = await self.control.save_ready(namespace, name, save.version)
        if save.cut_at is None and ready.status == "ready":
            self._observe_cut(ready)
        self.save_ended(ready)
        covered = await self._covered_ended(save)
        if ready.ready_at is not None:
            oldest = min(s.requested_at for s in [*covered, ready])
            self.metrics.recovery_point_lag.observe((ready.ready_at - oldest).total_seconds())
        self.metrics.saves.labels("ready").inc()
        waited = datetime.now(UTC) - save.requested_at
        self.metrics.save_duration.observe(waited.total_seconds())
        log.info("workspace %s/%s: save %d ready", namespace, name, save.version)
        if (resolved := await self._resolved(save)) is not None:
            await self._prune(namespace, name, resolved[1].keep_saves)

    async def _attempt_failed(self, save: SaveRow, message: str) -> None:
        """One attempt at ``save`` failed: it is taken again after a backoff, or
        given up after ``ControlConfig.max_save_attempts``."""
        namespace, name, version = save.namespace, save.workspace, save.version
        save = await self.control.save_failed(namespace, name, version, message)
        self.metrics.saves.labels("failed").inc()
        if save.status != "pending":
            await self._given_up(save)
        # Backoff: 2, 4, 8... seconds (at most a minute) before the Workspace's
        # next attempt (of this save, or of a newer one covering it).
        delay = min(2.0**save.attempts, 60.0)
        self._retry_at[(namespace, name)] = asyncio.get_running_loop().time() + delay
        log.warning(
            "workspace %s/%s: save %d attempt %d failed: %s",
            namespace,
            name,
            version,
            save.attempts,
            message,
        )

    async def _in_the_way(self, save: SaveRow, snapshot: dict[str, Any]) -> None:
        """A VolumeSnapshot with the save's name, made for another Turn, is never
        followed: its files are not this save's. Helmr's, of a Workspace of this name
        the store no longer knows (deleted and made again before its garbage was
        collected), it is deleted, and the save taken again once it is gone; anyone
        else's is left alone, and the attempt fails saying so."""
        name = save_name(save.workspace, save.version)
        labels = (snapshot.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_WORKSPACE) != save.workspace:
            await self._attempt_failed(save, f"VolumeSnapshot {name} is in the way: not Helmr's")
            return
        log.warning(
            "workspace %s/%s: VolumeSnapshot %s is an earlier Workspace's of this name"
            " (Turn %s): deleted, save %d taken again once it is gone",
            save.namespace,
            save.workspace,
            name,
            labels.get(LABEL_TURN_ID),
            save.version,
        )
        await self.kube.delete_snapshot(save.namespace, name)

    async def _unavailable(self, save: SaveRow, why: str) -> None:
        """The cluster cannot save this disk (:mod:`helmr.operator.disks.save_support`):
        the save is given up now, with no VolumeSnapshot made and nothing retried;
        the Actor's ``SavesAvailable`` condition tells why, once, not a warning per save."""
        given_up = await self.control.save_failed(
            save.namespace,
            save.workspace,
            save.version,
            f"saves are unavailable: {why}",
            final=True,
        )
        self.metrics.saves.labels("unavailable").inc()
        await self.control.align_saves(save.namespace, save.workspace, False)
        await self._given_up(given_up)

    async def _given_up(self, save: SaveRow) -> None:
        """``save`` will never be ready, and neither will those it covered."""
        self.save_ended(save)
        await self._covered_ended(save)

    async def _covered_ended(self, save: SaveRow) -> list[SaveRow]:
        """The saves ``save`` covered ended with it (committed if it is ready); returns them."""
        covered = await self.control.covered_saves(save.namespace, save.workspace, save.version)
        for each in covered:
            self.save_ended(each)
        return covered

    async def _resolved(self, save: SaveRow) -> tuple[Workspace, ComputerSpec] | None:
        """The save's Workspace and the disk settings in force (its overrides, else
        the Actor's), or None when the Workspace or the session's Actor is gone."""
        session = await self.control.get_session(save.session_id)
        return await self._settings(session)

    async def _settings(self, session: SessionView) -> tuple[Workspace, ComputerSpec] | None:
        """The Session's Workspace and its disk settings in force, or None when the
        Workspace or the Actor is gone. Both read at once: a save taken waits for
        them, and so does its Session's next Turn."""
        workspace, actor = await asyncio.gather(
            self.kube.get_resource(Workspace, session.namespace, session.workspace),
            self._actor(session.namespace, session.actor),
        )
        if workspace is None or actor is None:
            return None
        return workspace, workspace.spec.resolve(actor.spec.computer)

    async def why_unsaved(self, session: SessionView) -> str | None:
        """Why the cluster cannot save the Session's disk at all (an execution loss
        says so), or None: it can, may, or its Workspace or Actor is gone. As last
        resolved for its Workspace; resolved now only if never since this started."""
        key = (session.namespace, session.workspace)
        if key not in self._unsaved:
            resolved = await self._settings(session)
            if resolved is None:
                return None
            await self._resolve_unsaved(key, resolved[1])
        return self._unsaved[key]

    async def _resolve_unsaved(self, key: tuple[str, str], computer: ComputerSpec) -> str | None:
        why = (await self.save_support.verdict(computer)).why_unavailable
        self._unsaved[key] = why
        return why

    async def _take(self, save: SaveRow) -> Followed | None:
        """Asks for the save's snapshot, followed from before it is made (its first
        events carry its uid, which its content names); None if none was asked for.

        What the snapshot is made of is read at once, not one read after another:
        the Session's next Turn waits from the save taken to its cut, and the reads
        in a row (three of the store, two of the apiserver) took 66 ms of the 259 ms
        of one traced save on the loaded local cluster (issue 28,
        ``benchmarks/bench_computer.py``)."""
        resolved, claim, covered = await asyncio.gather(
            self._resolved(save),
            self._claim_to_save(save),
            self.control.covered_saves(save.namespace, save.workspace, save.version),
        )
        if resolved is None:
            await self.control.save_failed(
                save.namespace,
                save.workspace,
                save.version,
                "the Workspace or the session's Actor is gone: cannot take the save",
            )
            return None
        workspace, computer = resolved
        why = await self._resolve_unsaved((save.namespace, save.workspace), computer)
        if why is not None:
            await self._unavailable(save, why)
            return None
        spec = SaveSpec(
            workspace=WorkspaceRef.of(workspace),
            version=save.version,
            disk=save.disk,
            session_id=save.session_id,
            turn_id=save.turn_id,
            snapshot_class=computer.volume_snapshot_class_name,
            claim=claim,
            covered_turns=tuple(each.turn_id for each in covered),
        )
        body = build_save_spec(spec)
        followed = self.snapshots.follow(save.namespace, body["metadata"]["name"])
        try:
            await self.kube.create_snapshot(save.namespace, body)
        except Exception as exc:
            self.snapshots.forget(save.namespace, body["metadata"]["name"])
            if not namespace_terminating(exc):
                raise
            # Its namespace is going, and the Workspace with it: an attempt that
            # failed (given up after the last), not a step to retry at every pass.
            await self._attempt_failed(save, "its namespace is being deleted")
            return None
        return followed

    async def _claim_to_save(self, save: SaveRow) -> str | None:
        """The claim a save of the Workspace's first disk is of, as the store names it
        (a pooled runner's, adopted); None for later disks, named by their number."""
        if save.disk != 1:
            return None
        return (await self.control.get_workspace(save.namespace, save.workspace)).claim_name

    async def _prune(self, namespace: str, name: str, keep: int) -> None:
        for save in await self.control.saves_to_prune(namespace, name, keep):
            await self.kube.delete_snapshot(namespace, save_name(name, save.version))
            await self.control.save_pruned(namespace, name, save.version)

    async def _require_ready(self, namespace: str, snapshot_name: str) -> None:
        snapshot = await self.kube.get_snapshot(namespace, snapshot_name)
        if snapshot is None:
            raise RestoreFailed(f"save {snapshot_name} to restore from is gone")
        if not (snapshot.get("status") or {}).get("readyToUse"):
            raise RestoreFailed(f"save {snapshot_name} to restore from is not ready to use")

    async def pool_disk(
        self, namespace: str, name: str, actor: Actor, made: Workspace | None = None
    ) -> PoolDisk | None:
        """What a pooled claim of ``actor`` is as the Workspace's first disk: the
        Workspace (``made`` by the API at the Session's start, its store state reset
        then; else made now if missing, with the Actor's settings), the disk's usage
        thresholds and the Workspace's save policy; None when the Workspace overrides
        the Actor's disk settings (a pooled claim is made with the Actor's)."""
        workspace, new = (
            (made, False) if made is not None else await self._made_or_read(namespace, name)
        )
        computer = actor.spec.computer
        if workspace.spec.resolve(computer) != computer:
            return None
        why = await self._resolve_unsaved((namespace, name), computer)
        disk = AdoptedDisk(
            storage=disk_usage_spec(computer).limits,
            aligned=why is None,
            save_interval=timedelta(seconds=computer.save_interval_seconds),
            new_workspace=new,
        )
        return PoolDisk(WorkspaceRef.of(workspace), disk)

    async def _made_or_read(self, namespace: str, name: str) -> tuple[Workspace, bool]:
        """The Workspace, and whether it was made now (created first: a new Session's
        Workspace is most often new, and then this is one round trip). Its store state
        is reset by the adoption's transaction, not here."""
        made = await self.kube.create_resource(build_workspace(namespace, name))
        if made is not None:
            return made, True
        workspace = await self.kube.get_resource(Workspace, namespace, name)
        if workspace is None:  # deleted meanwhile
            return await self._made_or_read(namespace, name)
        return workspace, False

    async def _ensure_workspace(self, namespace: str, name: str) -> Workspace:
        """The Workspace, made on first use with the Actor's settings."""
        workspace = await self.kube.get_resource(Workspace, namespace, name)
        if workspace is not None:
            return workspace
        made = await self.kube.create_resource(build_workspace(namespace, name))
        if made is None:  # made meanwhile by someone else
            return await self._ensure_workspace(namespace, name)
        # Made anew: whatever the store knew of an older Workspace of this name
        # (deleted with kubectl) went with that one's claims and saves.
        await self.control.reset_workspace(namespace, name)
        return made

    async def _actor(self, namespace: str, name: str) -> Actor | None:
        return await self.kube.get_resource(Actor, namespace, name)


def by_workspace(saves: list[SaveRow]) -> dict[tuple[str, str], list[SaveRow]]:
    """Pending saves grouped by Workspace, each group in the order given (oldest first)."""
    groups: dict[tuple[str, str], list[SaveRow]] = {}
    for save in saves:
        groups.setdefault((save.namespace, save.workspace), []).append(save)
    return groups
