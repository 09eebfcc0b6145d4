"""Where a Session's Computer disk lives: the seam between the supervisor, which
starts a runner only on a disk made ready for it, and what keeps the disks.

:class:`~helmr.operator.disks.workspaces.Disks` keeps each as Kubernetes claims and
VolumeSnapshots; a backend of local directories (``helmr dev``) implements the same
protocol.
"""

from __future__ import annotations

from typing import Protocol

from helmr.control import SessionView
from helmr.operator.disks.manifests import PreparedDisk
from helmr.resources import Actor


class RestoreFailed(Exception):
    """The disk cannot be restored: its save is gone or unusable."""


class DiskInTheWay(Exception):
    """The disk cannot be made yet: an earlier one of its name is still there (an
    earlier Workspace's of the same name, being deleted). The supervisor's next
    pass prepares it again."""


class DiskBackend(Protocol):
    async def prepare(self, session: SessionView, actor: Actor) -> PreparedDisk:
        """The disk the Session's next runner mounts, made ready (restored from the
        restore point after an execution loss: RestoreFailed if it cannot be;
        DiskInTheWay while an earlier disk of its name is still there)."""
        ...

    async def reconcile(self) -> None:
        """One pass over the disks' saves: each pending one moves a step."""
        ...

    async def why_unsaved(self, session: SessionView) -> str | None:
        """Why the Session's disk cannot be saved at all (an execution loss says so),
        or None."""
        ...
