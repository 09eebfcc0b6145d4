"""The Computer disk in the state machine: a save requested with each completed
Turn, the saves' progress, and the restore chosen after an execution loss.

The functions run inside a write (or read) transaction. A completed Turn and
its save request commit together, so a crash cannot lose the request. The
operator turns pending saves into VolumeSnapshots and reports back; the last
ready save is the Workspace's committed Computer version.

Saves are coalesced: the operator takes one save of a Workspace at a time, and
when it takes the newest pending one, the older pending saves of the same disk
(requested while another was being taken) are ``covered`` by it instead of
each being taken: a snapshot taken later holds their state too. A covered save
shares its coverer's fate: committed when that one is ready, in the recovery
gap if that one never is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from helmr.control.config import ControlConfig
from helmr.errors import Conflict
from helmr.protocol.api import WorkspaceView, workspace_id
from helmr.resources.workspace import claim_name, save_name
from helmr.store import ReadTx, SessionRow, TurnRow, Tx, disks, sessions
from helmr.store.rows import DiskRow, SaveRow


@dataclass(frozen=True, slots=True)
class Restore:
    """What an execution loss did to the Workspace's disk."""

    computer_id: str
    """The lost disk: the PVC the lost runner wrote."""
    restore_point: str | None
    """The save the next runner's disk is restored from; None: an empty disk."""
    gap: tuple[str, ...]
    """Completed Turns whose saves were not ready: their files may be missing."""


def request_save(tx: Tx, session: SessionRow, turn: TurnRow) -> SaveRow:
    """A background save of the disk the completed ``turn`` of ``session`` ran on."""
    return disks.request_save(tx, session.namespace, session.workspace, session.id, turn.id)


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
    return Restore(
        computer_id=claim_name(session.workspace, disk.disk),
        restore_point=None
        if restored_from is None
        else save_name(session.workspace, restored_from),
        gap=tuple(save.turn_id for save in reversed(lost) if save.session_id == session.id),
    )


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


def pending_saves(rt: ReadTx) -> list[SaveRow]:
    """Every save requested and not yet ready, failed or lost, oldest first."""
    return disks.pending(rt)


def take_save(tx: Tx, namespace: str, workspace: str, version: int) -> list[SaveRow]:
    """The operator takes save ``version`` (the newest pending one) next: the older
    pending saves of its disk are covered by it, and so are the saves they covered.
    Returns the saves covered now, oldest first. Written before the snapshot is created, so a
    crash in between leaves the taken save pending, to be taken again."""
    save = disks.require_save(tx, namespace, workspace, version)
    if save.status != "pending":
        return []
    oldest_first = disks.saves(tx, namespace, workspace, "pending")[::-1]
    covered = covered_by_taking(oldest_first, save)
    for older in covered:
        for earlier in disks.covered_by(tx, namespace, workspace, older.version):
            disks.update_save(tx, earlier, covered_by=version)
        disks.update_save(tx, older, status="covered", covered_by=version)
    # No touch of the Session: the Workspace's pending count shown in its status
    # catches up when the taken save ends (one status write instead of two).
    return covered


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
    for covered in disks.covered_by(tx, namespace, workspace, version):
        disks.update_save(tx, covered, ready_at=tx.now)
    return disks.update_save(tx, save, status="ready", ready_at=tx.now, error=None)


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
    (no attempt can succeed: the cluster cannot save this disk). Nothing is rerun."""
    save = disks.require_save(tx, namespace, workspace, version)
    if save.status != "pending":
        return save
    attempts = save.attempts + 1
    status = "failed" if final or attempts >= config.max_save_attempts else "pending"
    tx.touch(save.session_id)
    return disks.update_save(tx, save, status=status, attempts=attempts, error=error[:1024])


def saves_to_prune(rt: ReadTx, namespace: str, workspace: str, keep: int) -> list[SaveRow]:
    """Saves whose snapshots are to be deleted: ready ones beyond the newest ``keep``
    (the newest ready one is always kept), and those whose disk was lost. (A
    failed attempt's snapshot is deleted before the failure is reported.)"""
    ready = disks.saves(rt, namespace, workspace, "ready")[max(keep, 1) :]
    return ready + disks.saves(rt, namespace, workspace, "lost")


def save_pruned(tx: Tx, namespace: str, workspace: str, version: int) -> SaveRow:
    return disks.update_save(
        tx, disks.require_save(tx, namespace, workspace, version), status="pruned"
    )


def workspace_view(rt: ReadTx, namespace: str, workspace: str) -> WorkspaceView:
    disk = disks.get(rt, namespace, workspace)
    ready = disks.saves(rt, namespace, workspace, "ready")
    holder = sessions.workspace_owner(rt, namespace, workspace)
    return WorkspaceView(
        id=workspace_id(namespace, workspace),
        namespace=namespace,
        name=workspace,
        claim_name=claim_name(workspace, 1 if disk is None else disk.disk),
        computer_version=save_name(workspace, ready[0].version) if ready else None,
        restored_from=(
            None
            if disk is None or disk.restored_from is None
            else save_name(workspace, disk.restored_from)
        ),
        pending_saves=len(disks.saves(rt, namespace, workspace, "pending")),
        held_by=None if holder is None else holder.id,
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


def reset_workspace(tx: Tx, namespace: str, workspace: str) -> None:
    """Forgets the disk and saves of a Workspace whose objects are gone (it was
    deleted outside Helmr and is made anew): the next runner starts on an empty disk."""
    disks.delete_workspace(tx, namespace, workspace)
