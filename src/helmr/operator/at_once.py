"""Steps of many objects, a few under way at a time.

The supervisor's starts, the Computer's save steps and the status mirror's
patches are each a few apiserver round trips per object: one after another they
add up to passes of minutes at thousands of Sessions, and all at once they would
queue thousands of calls behind the Kubernetes call threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from helmr.kube import threads as kube_threads

AT_ONCE = kube_threads.THREADS
"""Objects a pass steps at once (the supervisor's Sessions, the disk keeper's
Workspaces, the status mirror's Sessions, the pod reports handed over): each step
is a few Kubernetes calls, so as many as those calls have threads keeps the
threads busy, and no more."""


async def each_at_once(limit: int, steps: Iterable[Callable[[], Awaitable[None]]]) -> None:
    """Runs every step, at most ``limit`` under way at once, until all have ended.

    ``limit`` workers take the steps one after another, each as it is free: a pass
    over thousands of Sessions holds ``limit`` steps under way, not a task waiting
    for its turn per Session (a restart's passes, several at once, held thousands
    of them: docs/sizing.md, "A restart's high water, again"). Steps are taken
    from ``steps`` only as they start. Each step isolates its own errors: one that
    raises ends the wait for the others, which run on."""
    queue = iter(steps)

    async def worker() -> None:
        for step in queue:
            await step()

    await asyncio.gather(*(worker() for _ in range(limit)))
