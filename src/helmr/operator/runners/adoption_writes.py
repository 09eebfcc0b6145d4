"""The Kubernetes side of a warm pool's adoption, written after its commit.

The store's adoption (:mod:`helmr.control.adoptions`) is what answers the pooled
runner and maps its token to the Session: the runner starts on it. The pod's labels
and owner (its Session's runner pod of that epoch: pod events then report to it,
the Session's deletion collects it) and the claim's (the Workspace's first disk,
collected with it) follow, off the runner's path. Both patches are idempotent. A
crash between the commit and them leaves a pod still labelled pooled whose uid the
store says is adopted: the pool's next pass writes them then (:meth:`resume`); and
the supervisor's recovery reads the store's adoption for a live first process
whose pod it cannot find by label (``Supervisor.recover``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from helmr.control.operator_api import OperatorControl
from helmr.errors import NotFound
from helmr.kube.client import Kube
from helmr.kube.errors import NotFound as KubeNotFound
from helmr.operator.disks.manifests import WorkspaceRef
from helmr.operator.runners.pool_pods import adopted_claim_patch, adopted_pod_patch
from helmr.resources import Session, Workspace
from helmr.store.rows import AdoptionRow

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AdoptedObjects:
    """What an adoption's patches name: the Session (its resource's uid, None when
    it is gone: the pod is labelled, not owned) and its Workspace (None when gone:
    the claim stays the pod's, collected with it)."""

    adoption: AdoptionRow
    session_name: str
    session_uid: str | None
    workspace: WorkspaceRef | None


class AdoptionWrites:
    def __init__(
        self,
        control: OperatorControl,
        kube: Kube,
        pod_gone: Callable[[AdoptionRow], Awaitable[None]],
    ) -> None:
        """``pod_gone`` is told of an adopted pod found gone before its labels were
        written: no pod event can report its process's end then."""
        self._control = control
        self._kube = kube
        self._pod_gone = pod_gone

    async def write(self, objects: AdoptedObjects) -> None:
        """Labels and owns the adopted pod and its claim (the two at once)."""
        row = objects.adoption
        patches = [self._pod(objects)]
        if objects.workspace is not None:
            patch = adopted_claim_patch(objects.workspace)
            patches.append(self._kube.patch_claim(row.namespace, row.claim, patch))
        results = await asyncio.gather(*patches, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _pod(self, objects: AdoptedObjects) -> None:
        row = objects.adoption
        patch = adopted_pod_patch(
            objects.session_name, objects.session_uid, row.session_id, row.epoch
        )
        try:
            await self._kube.patch_pod(row.namespace, row.pod_name, patch)
        except KubeNotFound:
            log.warning(
                "session %s: adopted pod %s is gone before it was labelled",
                row.session_id,
                row.pod_name,
            )
            await self._pod_gone(row)

    async def resume(self, row: AdoptionRow) -> None:
        """Writes the patches of an adoption committed by a process that ended before
        writing them (read again: the Session's name, its resource, its Workspace)."""
        try:
            session = await self._control.get_session(row.session_id)
        except NotFound:  # its history went with the store: nothing to label it for
            return
        owner, workspace = await asyncio.gather(
            self._kube.get_resource(Session, session.namespace, session.name),
            self._kube.get_resource(Workspace, session.namespace, session.workspace),
        )
        log.info("session %s: labelling adopted pod %s", row.session_id, row.pod_name)
        await self.write(
            AdoptedObjects(
                adoption=row,
                session_name=session.name,
                session_uid=None if owner is None else owner.owner_reference().uid,
                workspace=None if workspace is None else WorkspaceRef.of(workspace),
            )
        )
