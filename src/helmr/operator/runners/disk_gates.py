"""Runner pods held back from the scheduler until their disk's claim is bound.

With a StorageClass that binds its claims by itself (``volumeBindingMode:
Immediate``), a runner pod made together with its fresh claim (an empty disk, a
restore from a save) is first refused by kube-scheduler ("pod has unbound
immediate PersistentVolumeClaims") and parked until an event of the claim wakes
it. kube-scheduler (1.34) can lose that wake-up: its queue is told of the
claim's update before the volume binder's own cache of claims has it, the retry
reads the claim unbound once more, and then nothing wakes the pod before the
unschedulable pods' periodic flush, five minutes later. CI saw it: a pod on a
claim restored from a save, Bound within a second, was never scheduled in 180 s.

So such a pod is made with the scheduling gate ``pods.DISK_GATE`` (the
scheduler does not try a gated pod at all), and :class:`DiskGates` removes the
gate once the apiserver says the claim is Bound: the scheduler's first attempt
finds it bound. The pod's process is registered as usual meanwhile, so a claim
that never binds fails the preparation at its deadline, the pod saying it is
gated. A claim bound only for the pod that mounts it (WaitForFirstConsumer) is
never gated. After a restart, kopf's watch of runner pods hands each pod still
gated to :meth:`DiskGates.follow` again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from helmr.kube.client import Kube
from helmr.kube.errors import KubeError
from helmr.operator.disks.manifests import claim_bound
from helmr.operator.runners.pods import DISK_GATE
from helmr.operator.settings import Settings
from helmr.resources import ComputerSpec

log = logging.getLogger(__name__)

FIRST_READ_SECONDS = 0.05
"""The claim's first read after the pod's creation; each next one waits twice as
long, up to ``LONGEST_WAIT_SECONDS``: an empty claim binds in a fraction of a
second, a restore takes its copy's time."""
LONGEST_WAIT_SECONDS = 0.5

BindsAtOnce = Callable[[ComputerSpec], Awaitable[bool]]
"""Whether a disk of these settings is bound as its claim is made (Immediate)."""


class DiskGates:
    """Removes each gated pod's ``DISK_GATE`` once its claim is bound; gives up after
    ``give_up_after`` seconds (the runner's preparation deadline: past it the pod's
    preparation has failed and the pod is removed)."""

    def __init__(
        self,
        kube: Kube,
        *,
        give_up_after: float,
        binds_at_once: BindsAtOnce | None = None,
        first_wait: float = FIRST_READ_SECONDS,
    ) -> None:
        """``binds_at_once``: whether a disk's claim is bound as it is made, for a pod
        made before its claim (a pooled one, :meth:`gated`); none: never gated."""
        self._kube = kube
        self._give_up_after = give_up_after
        self._binds_at_once = binds_at_once
        self._first_wait = first_wait
        self._following: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def gated(self, computer: ComputerSpec) -> bool:
        """A pod made before its claim, of a disk with the settings ``computer``, is
        made gated (then :meth:`follow` it once its claim is made)."""
        return self._binds_at_once is not None and await self._binds_at_once(computer)

    def follow(self, namespace: str, pod: str, claim: str) -> None:
        """Ungates ``pod`` once ``claim`` is bound; nothing if it is followed already."""
        key = (namespace, pod)
        if key in self._following:
            return
        task = asyncio.create_task(self._ungate_when_bound(namespace, pod, claim))
        self._following[key] = task
        task.add_done_callback(lambda _: self._following.pop(key, None))

    async def drained(self) -> None:
        """Returns once no pod is followed (each ungated, or given up)."""
        while self._following:
            await asyncio.gather(*self._following.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._following.values()):
            task.cancel()
        await self.drained()

    async def _ungate_when_bound(self, namespace: str, pod: str, claim: str) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._give_up_after
        wait = self._first_wait
        while True:
            await asyncio.sleep(wait)
            try:
                if claim_bound(await self._kube.get_claim(namespace, claim)):
                    await self._kube.remove_scheduling_gate(namespace, pod, DISK_GATE)
                    return
            except KubeError as exc:  # an apiserver hiccup: read again
                log.warning("pod %s/%s: claim %s not read: %s", namespace, pod, claim, exc)
            if loop.time() >= give_up:
                log.warning(
                    "pod %s/%s: claim %s not bound in %gs; the pod stays gated",
                    namespace,
                    pod,
                    claim,
                    self._give_up_after,
                )
                return
            wait = min(wait * 2, LONGEST_WAIT_SECONDS)


def disk_gates(
    kube: Kube, settings: Settings, binds_at_once: BindsAtOnce | None = None
) -> DiskGates:
    """The gates of the runner pods of an operator with ``settings``."""
    return DiskGates(
        kube,
        give_up_after=settings.preparation_timeout.total_seconds(),
        binds_at_once=binds_at_once,
    )
