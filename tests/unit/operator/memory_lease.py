"""An in-memory Lease with the apiserver's optimistic concurrency (resourceVersion),
and a clock the test moves: for the leader-election unit tests."""

from __future__ import annotations

from dataclasses import replace

from helmr.kube.lease import LeaseConflict, LeaseRecord
from helmr.operator.leadership.lease import LeaseTiming

TIMING = LeaseTiming(duration=15, renew_deadline=10, retry=0.01)


class MemoryLease:
    """One Lease object: a write naming an old resourceVersion conflicts."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.failing = False

    async def get(self) -> LeaseRecord | None:
        if self.failing:
            raise ConnectionError("apiserver unreachable")
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        if self.record is not None:
            raise LeaseConflict("exists")
        return self._store(record)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        if self.failing:
            raise ConnectionError("apiserver unreachable")
        if self.record is None or record.version != self.record.version:
            raise LeaseConflict("changed meanwhile")
        return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        version = 1 if self.record is None else int(self.record.version or 0) + 1
        self.record = replace(record, version=str(version))
        return self.record


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
