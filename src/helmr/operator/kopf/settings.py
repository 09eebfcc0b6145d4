"""How kopf runs Helmr's handlers: where it keeps its own records, what it posts,
and how much of the cluster it holds in memory at once.

After a restart kopf lists every Session and every runner pod, and hands each
object to a worker of its own. Two of its defaults made that listing the control
plane's high water mark, which the allocator keeps long after (its arenas stay
pinned by the objects that outlive the restart): the whole list in one response
(every runner pod's JSON at once), and each worker keeping its object's last event
for seconds after handling it. What changing them saves is measured by
``benchmarks/bench_operator_memory.py`` (docs/sizing.md).
"""

from __future__ import annotations

import logging

import kopf

LISTING_CHUNK = 100
"""Objects per page of kopf's listing at start (a LIST call each)."""
WORKER_IDLE_SECONDS = 0.5
"""How long an object's kopf worker waits for its next event before it exits,
letting go of the last one. kopf's default is 5 s; a worker started again costs
a task, and a Session's events (its status patches) come seconds apart anyway."""


def configure(settings: kopf.OperatorSettings) -> None:
    # Progress in annotations: the CRDs' status schemas are strict and would
    # prune kopf's own status fields.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kopf.helmr.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="kopf.helmr.dev", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.watching.chunk_size = LISTING_CHUNK
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS
