"""The Computer disk in the state machine: a save requested with each completed
Turn, the saves' progress, and the restore chosen after an execution loss.

The functions run inside a write (or read) transaction. A completed Turn and
its save request commit together, so a crash cannot lose the request. The
operator turns pending saves into VolumeSnapshots and reports back; the last
ready save is the Workspace's committed Computer version.

Saves are turn-aligned: a save belongs to exactly the state after its Turn. The
Session's next Turn is not dispatched until the save's point in time is cut
(``awaiting_cut``: the snapshot's ``creationTime`` is set, which on most
drivers comes long before it is ready to use), so no Turn writes to the disk
between its predecessor's end and the cut. Background work of the actor's
process between Turns is another matter: whatever it wrote by the cut is in
the save (spec 000: files the actor did not publish can be lost).

Saves are coalesced: the operator takes one save of a Workspace at a time, and
when it takes the newest pending one, the older pending saves of the same disk
(requested while another was being taken) are ``covered`` by it instead of
each being taken: a snapshot taken later holds their state too. A covered save
shares its coverer's fate: committed when that one is ready, in the recovery
gap if that one never is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta

from helmr.control.config import ControlConfig
from helmr.errors import Conflict
from helmr.protocol.api import ForkView, WorkspaceView, workspace_id
from helmr.resources.workspace import claim_name, disk_claim, save_name
from helmr.store import ReadTx, SessionRow, TurnRow, Tx, disks, sessions, turns
from helmr.store.rows import DiskRow, ForkRow, SaveRow, take_due


@dataclass(frozen=True, slots=True)
class Restore:
    """What an execution loss did to the Workspace's disk."""

    computer_id: str
    """The lost disk: the PVC the lost runner wrote."""
    restore_point: str | None
    """The save the next runner's disk is restored from; None: an empty disk."""
    gap: tuple[str, ...]
    """Completed Turns whose saves were not ready: their files may be missing."""


def request_save(tx: Tx, session: SessionRow, turn: TurnRow) -> int | None:
    """A background save of the disk the completed ``turn`` of ``session`` ran on.
    Returns its version when the Session's next Turn is to wait for its cut: the
    Workspace's saves are cut at Turns' ends and no other save of it is being
    taken, so this one can be taken now (else it is covered by the next save
    taken at a Turn's end, and the next Turn runs)."""
    version, cut_now = disks.request_save(
        tx, session.namespace, session.workspace, session.id, turn.id
    )
    return version if cut_now else None


def lose_disk(tx: Tx, session: SessionRow) -> Restore:
    """The runner's execution was lost, and its disk with it: the next runner
    gets a disk restored from the last ready save. Pending saves of the lost
    disk can no longer commit, whichever Session asked for them; the recovery
    gap is this Session's Turns among those the lost disk held unsaved (an
    earlier Session's on the same Workspace are not this one's to acknowledge)."""
    disk = disks.ensure(tx, session.namespace, session.workspace)
    ready = disks.saves(tx, session.namespace, session.workspace, "ready")
    restored_from = ready[0].version if ready else None
    lost = [
        disks.update_save(tx, save, status="lost") if save.status == "pending" else save
        for save in uncommitted(
            disks.saves(tx, session.namespace, session.workspace), disk.disk, restored_from
        )
    ]
    disks.replace_disk(tx, session.namespace, session.workspace, restored_from)
    if session.awaiting_cut is not None:  # that save is lost: nothing to wait for
        sessions.await_cut(tx, session.id, None)
    return Restore(
        computer_id=disk_claim(session.workspace, disk.disk, disk.first_claim),
        restore_point=_restore_point(session.workspace, restored_from, disk),
        gap=tuple(save.turn_id for save in reversed(lost) if save.session_id == session.id),
    )


def restore_point(workspace: str, disk: DiskRow) -> str | None:
    """The save the Workspace's current disk is restored from (None: it starts empty)."""
    return _restore_point(workspace, disk.restored_from, disk)


def _restore_point(workspace: str, restored_from: int | None, disk: DiskRow) -> str | None:
    """The save a disk is restored from: its Workspace's ``restored_from``, else the
    save a fork started from (a forked Workspace with no ready save of its own)."""
    if restored_from is not None:
        return save_name(workspace, restored_from)
    return None if disk.fork is None else disk.fork.snapshot


def uncommitted(saves: Sequence[SaveRow], disk: int, restored_from: int | None) -> list[SaveRow]:
    """The saves of ``disk`` after the restore point whose state never became a
    committed version, in the order given: still pending (those can no longer
    commit), given up, or covered by a save that was not ready. (A covered save
    whose coverer is ready is older than the restore point, the newest ready save.)"""
    return [
        save
        for save in saves
        if save.disk == disk
        and save.status in ("pending", "failed", "covered")
        and save.version > (restored_from or 0)
    ]


def covered_by_taking(pending: Sequence[SaveRow], taken: SaveRow) -> list[SaveRow]:
    """The pending saves that taking ``taken`` covers: the older ones of its disk,
    in the order given."""
    return [
        save
        for save in pending
        if save.status == "pending" and save.disk == taken.disk and save.version < taken.version
    ]


# Operator side -----------------------------------------------------------------------------


def current_disk(tx: Tx, namespace: str, workspace: str) -> DiskRow:
    """The disk generation the Workspace's next runner mounts (created on first use)."""
    return disks.ensure(tx, namespace, workspace)


def align_saves(
    tx: Tx, namespace: str, workspace: str, aligned: bool, interval: timedelta = timedelta()
) -> None:
    """Whether the Workspace's saves are cut at Turns' ends, each Session's next
    Turn waiting for the cut (the disk backend cuts them, and can save this disk),
    and its save policy: at most one save per ``interval`` (zero: every Turn),
    counted from the last save's cut. Counted from the cut, not from when the save
    was asked for, a cut slower than the interval (a loaded snapshot controller)
    still leaves an interval of Turns between two saves, instead of every Turn
    being saved and waiting for its cut."""
    disks.set_policy(tx, namespace, workspace, aligned=aligned, interval=interval)


def saves_to_step(rt: ReadTx, session_ids: Collection[str] | None = None) -> list[SaveRow]:
    """The pending saves the operator steps, oldest first: of each Workspace with any
    (``session_ids``: of those these Sessions use), its newest and those already taken
    (:func:`helmr.store.disks.to_step`)."""
    return disks.to_step(rt, session_ids)


def take_save(tx: Tx, namespace: str, workspace: str, version: int) -> list[SaveRow] | None:
    """The operator takes save ``version`` (the newest pending one) next, if the disk
    is still at its Turn's end (:func:`at_turn_end`; None, and nothing is written,
    if not: a later Turn's save will cover it). Its Session's next Turn waits for
    its cut; the older pending saves of its disk are covered by it, and so are the
    saves they covered. Returns the saves covered now, oldest first. Written before
    the snapshot is created, so a crash in between leaves the taken save pending,
    to be taken again."""
    save = disks.require_save(tx, namespace, workspace, version)
    if save.status != "pending":
        return []
    session = sessions.require(tx, save.session_id)
    disk = disks.require(tx, namespace, workspace)
    if disk.aligned:
        if not at_turn_end(tx, save, session) or not _due(tx, disk, session, version):
            return None
        if session.awaiting_cut != version:
            sessions.await_cut(tx, session.id, version)
    disks.update_save(tx, save, taken_at=tx.now)
    disks.set_taking(tx, namespace, workspace, version)
    oldest_first = disks.saves(tx, namespace, workspace, "pending")[::-1]
    covered = covered_by_taking(oldest_first, save)
    for older in covered:
        for earlier in disks.covered_by(tx, namespace, workspace, older.version):
            disks.update_save(tx, earlier, covered_by=version)
        disks.update_save(tx, older, status="covered", covered_by=version)
    # No touch of the Session: the Workspace's pending count shown in its status
    # catches up when the taken save ends (one status write instead of two).
    return covered


def at_turn_end(rt: ReadTx, save: SaveRow, session: SessionRow) -> bool:
    """Whether the disk holds the state ``save`` is of: no Turn has started on the
    Workspace since the save's Turn ended (its Session waits for this save's cut,
    or has started no Turn since; a Session holding the Workspace after it, none)."""
    if session.awaiting_cut == save.version:
        return True
    holder = sessions.workspace_owner(rt, save.namespace, save.workspace)
    if holder is not None and holder.id != session.id and _has_run(rt, holder):
        return False
    return session.active_turn_id is None and turns.last_started(rt, session.id) == save.turn_id


def _due(rt: ReadTx, disk: DiskRow, session: SessionRow, version: int) -> bool:
    """Whether save ``version`` is to be taken now (:func:`take_due`); the keeper's
    read of the saves to step asked the same (:func:`helmr.store.disks.to_step`)."""
    return take_due(
        version,
        session.awaiting_cut,
        session.process_live,
        disk.last_cut_at,
        disk.save_interval,
        rt.now,
    )


def _has_run(rt: ReadTx, session: SessionRow) -> bool:
    """Whether a Turn of the Session runs, or has run."""
    return session.active_turn_id is not None or turns.last_started(rt, session.id) is not None


def save_cut(tx: Tx, namespace: str, workspace: str, version: int) -> SaveRow | None:
    """The save's point in time is cut (its snapshot's ``creationTime`` is set): its
    Session's next Turn may run, though the save is not ready yet. None if it was
    cut already (or has ended)."""
    save = disks.require_save(tx, namespace, workspace, version)
    if save.cut_at is not None or save.status != "pending":
        return None
    _cut_waited(tx, save)
    disks.set_cut(tx, namespace, workspace)
    return disks.update_save(tx, save, cut_at=tx.now)


def not_cut_now(tx: Tx, namespace: str, workspace: str, version: int) -> None:
    """Save ``version`` is not taken now (its Workspace's last attempt failed and
    backs off): its Session's next Turn waits for it no more, and it is taken later
    only at a Turn's end (:func:`take_save`)."""
    _cut_waited(tx, disks.require_save(tx, namespace, workspace, version))


def _cut_waited(tx: Tx, save: SaveRow) -> None:
    """The save's Session waits for its cut no more (it is cut, ready, or will
    never be taken at this Turn's end)."""
    session = sessions.get(tx, save.session_id)
    if session is not None and session.awaiting_cut == save.version:
        sessions.await_cut(tx, session.id, None)


def save_ready(tx: Tx, namespace: str, workspace: str, version: int) -> SaveRow:
    """The save's snapshot is ready: it is a committed Computer version now, and
    so is the state of the saves it covered (their ``ready_at`` is set).

    A save whose disk was lost meanwhile stays ``lost``: the restore already
    chose an older version, and the Turns it covered are in the recovery gap.
    """
    save = disks.require_save(tx, namespace, workspace, version)
    if save.status != "pending":
        return save
    tx.touch(save.session_id)
    _cut_waited(tx, save)
    if save.cut_at is None:
        disks.set_cut(tx, namespace, workspace)
    disks.set_taking(tx, namespace, workspace, None)
    for covered in disks.covered_by(tx, namespace, workspace, version):
        disks.update_save(tx, covered, ready_at=tx.now)
    return disks.update_save(
        tx, save, status="ready", ready_at=tx.now, cut_at=save.cut_at or tx.now, error=None
    )


def covered_saves(rt: ReadTx, namespace: str, workspace: str, version: int) -> list[SaveRow]:
    """The saves that save ``version`` covers, oldest first."""
    return disks.covered_by(rt, namespace, workspace, version)


def save_failed(
    tx: Tx,
    config: ControlConfig,
    namespace: str,
    workspace: str,
    version: int,
    error: str,
    *,
    final: bool = False,
) -> SaveRow:
    """One attempt failed: the save stays pending, to be taken again, until
    ``config.max_save_attempts`` attempts have failed, or at once when ``final``
    (no attempt can succeed: the cluster cannot save this disk). Nothing is rerun.
    Its Session's next Turn waits for it no more: taken again, it is taken only at
    a Turn's end (:func:`take_save`)."""
    save = disks.require_save(tx, namespace, workspace, version)
    if save.status != "pending":
        return save
    _cut_waited(tx, save)
    disks.set_taking(tx, namespace, workspace, None)
    attempts = save.attempts + 1
    status = "failed" if final or attempts >= config.max_save_attempts else "pending"
    tx.touch(save.session_id)
    return disks.update_save(tx, save, status=status, attempts=attempts, error=error[:1024])


def saves_to_prune(rt: ReadTx, namespace: str, workspace: str, keep: int) -> list[SaveRow]:
    """Saves whose snapshots are to be deleted: ready ones beyond the newest ``keep``
    (the newest ready one is always kept, and so are the one the current disk is
    restored from, whose claim may not be made yet, and those a Workspace was
    forked from, which its disks start from), and those whose disk was lost.
    (A failed attempt's snapshot is deleted before the failure is reported.)"""
    disk = disks.get(rt, namespace, workspace)
    needed = None if disk is None else disk.restored_from
    forked = disks.fork_snapshots(rt, namespace)
    ready = disks.saves(rt, namespace, workspace, "ready")[max(keep, 1) :]
    kept = [
        save
        for save in ready
        if save.version != needed and save_name(workspace, save.version) not in forked
    ]
    return kept + disks.saves(rt, namespace, workspace, "lost")


def save_pruned(tx: Tx, namespace: str, workspace: str, version: int) -> SaveRow:
    return disks.update_save(
        tx, disks.require_save(tx, namespace, workspace, version), status="pruned"
    )


@dataclass(frozen=True, slots=True)
class RecoveryPoints:
    """How far behind the Sessions' recovery points are, store-wide."""

    oldest_unsaved_age: timedelta
    """The age of the oldest completed Turn whose save is pending (zero: none)."""
    saves_in_flight: int
    """Workspaces with a save being taken."""


def recovery_points(rt: ReadTx) -> RecoveryPoints:
    oldest = disks.oldest_unsaved(rt)
    return RecoveryPoints(
        oldest_unsaved_age=timedelta() if oldest is None else max(rt.now - oldest, timedelta()),
        saves_in_flight=disks.count_taking(rt),
    )


def workspace_view(rt: ReadTx, namespace: str, workspace: str) -> WorkspaceView:
    disk = disks.get(rt, namespace, workspace)
    ready = disks.saves(rt, namespace, workspace, "ready")
    holder = sessions.workspace_owner(rt, namespace, workspace)
    return WorkspaceView(
        id=workspace_id(namespace, workspace),
        namespace=namespace,
        name=workspace,
        claim_name=claim_name(workspace, 1)
        if disk is None
        else disk_claim(workspace, disk.disk, disk.first_claim),
        computer_version=save_name(workspace, ready[0].version) if ready else None,
        restored_from=None if disk is None else _restore_point(workspace, disk.restored_from, disk),
        pending_saves=disks.count(rt, namespace, workspace, "pending"),
        held_by=None if holder is None else holder.id,
        forked_from=None if disk is None or disk.fork is None else _fork_view(disk.fork),
    )


def _fork_view(fork: ForkRow) -> ForkView:
    return ForkView(
        session_id=fork.session_id,
        workspace=fork.workspace,
        save=fork.snapshot,
        turn_id=fork.turn_id,
    )


def require_unheld(rt: ReadTx, namespace: str, workspace: str) -> None:
    """Conflict, naming the holder, while a Session holds the Workspace."""
    holder = sessions.workspace_owner(rt, namespace, workspace)
    if holder is not None:
        raise Conflict(
            f"workspace {workspace} is held by session {holder.name} ({holder.id});"
            " close or cancel it, and wait for status closed, before deleting the workspace",
            workspace=workspace,
            session_id=holder.id,
            held_by=holder.name,
        )


def forget_workspace(tx: Tx, namespace: str, workspace: str) -> None:
    """Drops the Workspace's disk and saves from the store, its objects being
    deleted; Conflict while a Session holds it."""
    require_unheld(tx, namespace, workspace)
    disks.delete_workspace(tx, namespace, workspace)


def workspace_known(rt: ReadTx, namespace: str, workspace: str) -> bool:
    """Whether the store knows a disk or saves of a Workspace of that name: when its
    resource is made anew, an older one's, to reset (:func:`reset_workspace`)."""
    return disks.known(rt, namespace, workspace)


def reset_workspace(tx: Tx, namespace: str, workspace: str) -> None:
    """Forgets the disk and saves of a Workspace whose objects are gone (it was
    deleted outside Helmr, or is a fork, and is made anew): the next runner starts
    on an empty disk, or on the save it was forked from."""
    disk = disks.get(tx, namespace, workspace)
    disks.delete_workspace(tx, namespace, workspace)
    if disk is not None and disk.fork is not None:
        disks.set_fork(tx, namespace, workspace, disk.fork)
