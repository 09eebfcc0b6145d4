"""Warm pools in the state machine: a new Session's process adopts a pooled runner pod.

Adoption is one transaction: the Session's next process is registered (its epoch,
as :func:`helmr.control.processes.started` does) and prepared at once (the pod
runs already), the pod is recorded as that process's (a pod is adopted once, by
uid), the pod's claim becomes the Workspace's first disk, and what a cold start's
disk preparation stores comes with it (:class:`AdoptedDisk`: the disk's usage
thresholds, the Workspace's save policy), so no crash leaves the first process
without them. It is refused, changing nothing else, unless the Workspace has no
disk at all yet: a reopened Workspace, a restore, a fork, a wake keep the disk they
have (DESIGN 8). The commit wakes the pod's adoption long poll
(:func:`adoption_signal`): the pod's relabelling follows it, off the runner's path.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from helmr.control import preparation, processes
from helmr.control.config import ControlConfig
from helmr.control.disks import reset_workspace
from helmr.control.limits import resolve
from helmr.store import (
    ReadTx,
    SessionLimits,
    StorageLimits,
    Tx,
    adoptions,
    disks,
    sessions,
    storage_pressure,
)
from helmr.store.rows import AdoptionRow

SIGNAL_PREFIX = "adoption:"


def adoption_signal(pod_uid: str) -> str:
    """The key a pooled pod's adoption poll watches (``Store.watching``): no Session's id."""
    return SIGNAL_PREFIX + pod_uid


@dataclass(frozen=True, slots=True)
class PooledPod:
    """A pooled runner pod, and the claim it has mounted."""

    namespace: str
    name: str
    uid: str
    claim: str


@dataclass(frozen=True, slots=True)
class AdoptedDisk:
    """What the pooled claim is as the Session's disk: its usage thresholds, and the
    Workspace's save policy (whether its saves are cut at Turns' ends, at most one per
    ``save_interval``). ``new_workspace``: its Workspace resource was made just now,
    so what the store knew of an older one of that name goes (as a cold start's)."""

    storage: StorageLimits
    aligned: bool
    save_interval: timedelta
    new_workspace: bool = False


def adopt(
    tx: Tx,
    config: ControlConfig,
    session_id: str,
    epoch: int,
    pod: PooledPod,
    disk: AdoptedDisk,
    limits: SessionLimits | None = None,
) -> bool:
    """The Session's process ``epoch`` (its next) runs in ``pod``, on ``disk``; False,
    and nothing changes (but a new Workspace's reset), when it cannot: the Session's
    Workspace has a disk, the pod was adopted already, or ``epoch`` is not the
    Session's next (another start came first). ``limits``: the Session's, resolved
    here if it has none yet (as :func:`helmr.control.limits.resolve`: one write fewer
    on a new Session's path)."""
    session = sessions.require(tx, session_id)
    if disk.new_workspace:
        reset_workspace(tx, session.namespace, session.workspace)
    if (
        session.process_epoch + 1 != epoch
        or disks.get(tx, session.namespace, session.workspace) is not None
        or adoptions.of_pod(tx, pod.uid) is not None
    ):
        return False
    if limits is not None:
        resolve(tx, session_id, limits)
    started = processes.started(tx, config, session_id)
    assert started == epoch
    preparation.prepared(tx, session_id, epoch)
    adoptions.insert(
        tx,
        AdoptionRow(
            pod_uid=pod.uid,
            namespace=pod.namespace,
            pod_name=pod.name,
            claim=pod.claim,
            session_id=session_id,
            epoch=epoch,
        ),
    )
    adoptions.set_first_claim(tx, session.namespace, session.workspace, pod.claim)
    disks.set_policy(
        tx,
        session.namespace,
        session.workspace,
        aligned=disk.aligned,
        interval=disk.save_interval,
    )
    storage_pressure.set_limits(tx, session_id, disk.storage)
    tx.touch(session_id)
    tx.touch(adoption_signal(pod.uid))
    return True


def of_pod(rt: ReadTx, pod_uid: str) -> AdoptionRow | None:
    """The adoption of the pod ``pod_uid``, if it was adopted."""
    return adoptions.of_pod(rt, pod_uid)


def of_process(rt: ReadTx, session_id: str, epoch: int) -> AdoptionRow | None:
    """The pooled pod the Session's process ``epoch`` runs in, if it was adopted."""
    return adoptions.of_process(rt, session_id, epoch)


def of_pods(rt: ReadTx, pod_uids: list[str]) -> list[AdoptionRow]:
    """The adoptions of those of the pods ``pod_uids`` that were adopted."""
    return adoptions.of_pods(rt, pod_uids)
