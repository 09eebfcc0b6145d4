"""A pooled pod and the disk it becomes, as the adoption tests give them."""

from __future__ import annotations

from datetime import timedelta

from helmr.control.adoptions import AdoptedDisk, PooledPod
from helmr.store import StorageLimits

MIB = 1024 * 1024
DISK = AdoptedDisk(
    storage=StorageLimits(capacity_bytes=64 * MIB, pause_at=0.9, stop_at=0.98, resolve_at=0.85),
    aligned=True,
    save_interval=timedelta(seconds=30),
)
"""A 64 MiB claim, saved at Turns' ends at most every 30 s."""


def pooled(n: int = 1, namespace: str = "team") -> PooledPod:
    return PooledPod(
        namespace=namespace, name=f"reviewer-pool-{n}", uid=f"uid-{n}", claim=f"reviewer-pool-{n}"
    )
