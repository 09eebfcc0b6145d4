"""What a runner pod's watch event tells Control, read out of the event at once.

kopf hands each watch event's whole pod to its handler and keeps it alive while
the handler awaits. A runner pod with its managed fields is tens of KiB of Python
objects, and after a restart kopf lists every runner pod at once: with thousands
of Sessions, their pods held while each handler queued for the store were most of
the control plane's high water mark (docs/sizing.md). So the handler reads the few
facts it needs into a :class:`PodReport` and returns, and :class:`PodReports`
applies them: each pod's reports in the order they came, a few pods at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from helmr.kube.labels import LABEL_EPOCH, LABEL_SESSION_ID
from helmr.operator.runners.backend import RunnerRef
from helmr.operator.runners.preparation import container_started, failed_preparation

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PodReport:
    """One watch event of a runner pod, as much of it as Control needs."""

    namespace: str
    name: str
    session_id: str
    epoch: int
    deleted: bool
    started: bool
    """Its container is running, or ran and ended."""
    failure: str | None
    """Why its preparation cannot succeed (helmr.operator.runners.preparation), or None."""
    outcome: str
    """``running``, ``exited`` or ``lost`` (:func:`pod_outcome`)."""
    exit_code: int | None

    @classmethod
    def of(
        cls,
        runner: RunnerRef,
        *,
        deleted: bool,
        started: bool,
        outcome: str,
        exit_code: int | None = None,
    ) -> PodReport:
        """A report of ``runner`` that is not a pod's watch event (a pod found gone, a
        local process): nothing failed its preparation."""
        return cls(
            namespace=runner.namespace,
            name=runner.name,
            session_id=runner.session_id,
            epoch=runner.epoch,
            deleted=deleted,
            started=started,
            failure=None,
            outcome=outcome,
            exit_code=exit_code,
        )

    @classmethod
    def read(cls, event_type: str | None, namespace: str, pod: Mapping[str, Any]) -> PodReport:
        metadata = pod["metadata"]
        labels = metadata["labels"]
        outcome, exit_code = pod_outcome(pod)
        return cls(
            namespace=namespace,
            name=metadata["name"],
            session_id=labels[LABEL_SESSION_ID],
            epoch=int(labels[LABEL_EPOCH]),
            deleted=event_type == "DELETED",
            started=container_started(pod),
            failure=failed_preparation(pod),
            outcome=outcome,
            exit_code=exit_code,
        )


def pod_outcome(pod: Mapping[str, Any]) -> tuple[str, int | None]:
    """What a runner pod's status says: ``running``, ``exited`` with the exit
    code, or ``lost`` (evicted, deleted, or its node lost it: execution loss).

    A pod that ended after its deletion began (the eviction API, ``kubectl
    delete``, the supervisor's own stop) ended because of the deletion: its
    exit code (0 after SIGTERM, 137 after the grace period) says nothing about
    the actor, so it is not reported as an exit that could count as a failure.
    """
    status = pod.get("status") or {}
    if status.get("phase") in (None, "Pending", "Running"):
        return "running", None
    containers = status.get("containerStatuses") or []
    terminated = (containers[0].get("state") or {}).get("terminated") if containers else None
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp") is not None
    if status.get("reason") in ("Evicted", "NodeLost") or terminated is None or deleting:
        return "lost", None
    return "exited", int(terminated["exitCode"])


class PodReports:
    """Applies reports a few pods at a time; one pod's strictly one after another,
    as kopf's worker of that pod ran its events. A report that raises is logged
    and stalls no other (kopf does not retry watch events either).

    ``at_once`` workers take the pods with reports waiting, one pod each at a time:
    after a restart every runner pod reports at once, and a task per pod waiting for
    its turn held thousands (docs/sizing.md, "A restart's high water, again")."""

    def __init__(self, apply: Callable[[PodReport], Awaitable[None]], at_once: int) -> None:
        self._apply = apply
        self._at_once = at_once
        self._pods: dict[tuple[str, str], deque[PodReport]] = {}
        """Each pod's reports not yet applied, the one being applied first."""
        self._waiting: deque[tuple[str, str]] = deque()
        """Pods with reports that no worker has taken yet, in the order they came."""
        self._workers: set[asyncio.Task[None]] = set()

    def put(self, report: PodReport) -> None:
        key = (report.namespace, report.name)
        reports = self._pods.get(key)
        if reports is not None:  # waiting, or under way: taken after those before it
            reports.append(report)
            return
        self._pods[key] = deque((report,))
        self._waiting.append(key)
        if len(self._workers) < self._at_once:
            worker = asyncio.create_task(self._work(), name="pod reports")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)

    @property
    def pending(self) -> int:
        """Reports not yet applied, the one being applied included."""
        return sum(len(reports) for reports in self._pods.values())

    async def _work(self) -> None:
        # No await between the loop's test and a pod taken: one put meanwhile is seen.
        while self._waiting:
            key = self._waiting.popleft()
            reports = self._pods[key]
            try:
                while reports:
                    try:
                        await self._apply(reports[0])
                    except Exception:
                        log.exception("runner pod %s/%s: its event failed", *key)
                    reports.popleft()
            finally:
                # No await since the loop saw it empty: a report put meanwhile is in it.
                del self._pods[key]

    async def stop(self) -> None:
        for worker in list(self._workers):
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._waiting.clear()
        self._pods.clear()
