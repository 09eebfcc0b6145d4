"""Computer disks as local directories (:class:`~helmr.operator.disks.backend.DiskBackend`).

Each Workspace is a directory under the dev plane's root; each of its disk
generations a directory ``disk-N`` (a runner pod's claim), each save a directory
``save-V`` (a VolumeSnapshot): a copy of the disk taken after a completed Turn,
by reflink where the filesystem offers it (``cp --reflink=auto``: on btrfs or XFS
a copy costs no data). The store decides as for claims and snapshots
(``helmr.control.disks``): which disk generation is current, which save to take
(one at a time per Workspace, the newest covering older ones), which to restore
from after an execution loss, which to prune. So the save rows, ``execution_lost``,
``recovery_gap`` and the holds are those of the cluster's path.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from pathlib import Path

from helmr.control import SessionView
from helmr.control.disks import restore_point
from helmr.control.operator_api import OperatorControl
from helmr.operator.disks.backend import RestoreFailed
from helmr.operator.disks.manifests import PreparedDisk, disk_usage_spec
from helmr.operator.disks.workspaces import by_workspace
from helmr.resources import Actor, WorkspaceSpec
from helmr.resources.workspace import parse_save_name
from helmr.store.rows import SaveRow

log = logging.getLogger(__name__)

INCOMPLETE = ".incomplete"
"""Suffix of a save being copied: renamed to its name once whole."""


class DirectoryDisks:
    def __init__(self, control: OperatorControl, root: Path) -> None:
        """``root``: where the Workspaces' directories are (``.helmr/workspaces``)."""
        self.control = control
        self.root = root
        # When a Workspace whose last attempt failed may take a save again.
        self._retry_at: dict[tuple[str, str], float] = {}

    def workspace_dir(self, namespace: str, name: str) -> Path:
        return self.root / namespace / name

    def disk_dir(self, namespace: str, name: str, disk: int) -> Path:
        return self.workspace_dir(namespace, name) / f"disk-{disk}"

    def save_dir(self, namespace: str, name: str, version: int) -> Path:
        return self.workspace_dir(namespace, name) / f"save-{version}"

    async def computer(self, session: SessionView) -> Path:
        """The directory the Session's next (or current) runner works in."""
        disk = await self.control.current_disk(session.namespace, session.workspace)
        return self.disk_dir(session.namespace, session.workspace, disk.disk)

    async def prepare(self, session: SessionView, actor: Actor) -> PreparedDisk:
        """The Session's disk directory, made if missing (copied from the restore
        point after an execution loss); older disks are removed: the runner that
        wrote them is gone."""
        namespace, name = session.namespace, session.workspace
        computer = WorkspaceSpec().resolve(actor.spec.computer)
        if not self.workspace_dir(namespace, name).is_dir():
            # Made anew: whatever the store knew of an older one of this name went
            # with its directory, as a Workspace deleted with kubectl.
            await self.control.reset_workspace(namespace, name)
        disk = await self.control.current_disk(namespace, name)
        path = self.disk_dir(namespace, name, disk.disk)
        if not path.is_dir():
            restore = restore_point(name, disk)  # after a loss, or a fork's first disk
            if restore is None:
                path.mkdir(parents=True)
            else:
                save = self.save_dir(namespace, *parse_save_name(restore))
                if not save.is_dir():
                    raise RestoreFailed(f"save {save} to restore from is gone")
                await _copy(save, path)
            log.info("workspace %s/%s: disk %s made", namespace, name, path)
        for old in self.workspace_dir(namespace, name).glob("disk-*"):
            if old != path:
                await asyncio.to_thread(shutil.rmtree, old, ignore_errors=True)
        await self._prune(namespace, name, computer.keep_saves)
        usage = disk_usage_spec(computer)
        await self.control.set_storage_limits(session.id, usage.limits)
        return PreparedDisk(str(path), usage)

    async def why_unsaved(self, session: SessionView) -> str | None:
        return None  # a directory can always be copied

    async def reconcile(self) -> None:
        """Takes each Workspace's newest pending save (covering older ones)."""
        for (namespace, name), saves in by_workspace(await self.control.saves_to_step()).items():
            try:
                await self._advance(namespace, name, saves)
            except Exception:
                log.exception("workspace %s/%s: a save failed a step; retrying", namespace, name)

    async def delete_workspace(self, namespace: str, name: str) -> None:
        """The API's deletion, of a Workspace the store holds for no Session."""
        await asyncio.to_thread(
            shutil.rmtree, self.workspace_dir(namespace, name), ignore_errors=True
        )

    async def _advance(self, namespace: str, name: str, saves: list[SaveRow]) -> None:
        key = (namespace, name)
        if asyncio.get_running_loop().time() < self._retry_at.get(key, 0.0):
            return
        self._retry_at.pop(key, None)
        newest = saves[-1]
        await self.control.take_save(namespace, name, newest.version)
        target = self.save_dir(namespace, name, newest.version)
        try:
            await _copy(self.disk_dir(namespace, name, newest.disk), target)
        except OSError as exc:
            failed = await self.control.save_failed(namespace, name, newest.version, str(exc))
            delay = min(2.0**failed.attempts, 60.0)
            self._retry_at[key] = asyncio.get_running_loop().time() + delay
            log.warning("workspace %s/%s: save %d failed: %s", namespace, name, newest.version, exc)
            return
        await self.control.save_ready(namespace, name, newest.version)
        log.info("workspace %s/%s: save %d ready", namespace, name, newest.version)

    async def _prune(self, namespace: str, name: str, keep: int) -> None:
        for save in await self.control.saves_to_prune(namespace, name, keep):
            path = self.save_dir(namespace, name, save.version)
            await asyncio.to_thread(shutil.rmtree, path, ignore_errors=True)
            await self.control.save_pruned(namespace, name, save.version)


async def _copy(source: Path, target: Path) -> None:
    """``source`` copied whole to ``target`` (replaced), sharing blocks where the
    filesystem can; ``target`` appears only once complete."""
    partial = target.with_name(target.name + INCOMPLETE)
    await asyncio.to_thread(shutil.rmtree, partial, ignore_errors=True)
    # A fork's first disk is the first thing in its Workspace's directory.
    await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
    if not await asyncio.to_thread(source.is_dir):
        raise FileNotFoundError(f"{source} is gone")
    if sys.platform == "linux":
        process = await asyncio.create_subprocess_exec(
            "cp",
            "-a",
            "--reflink=auto",
            str(source),
            str(partial),
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        if process.returncode != 0:
            raise OSError(f"cp {source}: {err.decode(errors='replace').strip()}")
    else:
        await asyncio.to_thread(shutil.copytree, source, partial, symlinks=True)
    await asyncio.to_thread(shutil.rmtree, target, ignore_errors=True)
    partial.rename(target)
