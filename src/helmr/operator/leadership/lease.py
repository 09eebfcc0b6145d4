"""Leader election over a ``coordination.k8s.io`` Lease: client-go's algorithm, in asyncio.

A candidate takes the Lease when it has none, was released (no holder), or
its holder has not renewed it for the Lease's duration as this candidate's
own clock measures it (from when it last saw the record change, so the
replicas' clocks need not agree). Each change of holder raises
``leaseTransitions``: that count is the new holder's term, which the store
records for fencing (:mod:`helmr.store.leadership`). A holder renews every
retry period and steps down once it could not renew for the renew deadline,
which is shorter than the duration: it has stopped before anyone may take
over.

Every apiserver call runs in a worker thread with a timeout, so neither the
event loop nor a hung connection holds up stepping down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from helmr.kube.lease import LeaseConflict, LeaseRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """client-go's defaults: a leader lost is replaced within ``duration`` plus
    one ``retry`` of the candidate's."""

    duration: float = 15.0
    """A holder that has not renewed for this long may be replaced."""
    renew_deadline: float = 10.0
    """A holder that could not renew for this long steps down (< duration)."""
    retry: float = 2.0
    """Between a holder's renewals, and a candidate's attempts."""

    def __post_init__(self) -> None:
        if not 0 < self.retry < self.renew_deadline < self.duration:
            raise ValueError(f"lease timing needs 0 < retry < renew deadline < duration: {self}")


class LeaseApi(Protocol):
    async def get(self) -> LeaseRecord | None: ...
    async def create(self, record: LeaseRecord) -> LeaseRecord: ...
    async def replace(self, record: LeaseRecord) -> LeaseRecord: ...


class LeaderElector:
    def __init__(
        self,
        lease: LeaseApi,
        identity: str,
        timing: LeaseTiming | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``identity`` must be unique to this process (a restarted process is a
        new candidate); ``clock`` measures the Lease's age (tests pass a fake)."""
        self.lease = lease
        self.identity = identity
        self.timing = timing or LeaseTiming()
        self._clock = clock
        # The record last seen and when (this clock): another holder's Lease
        # expires ``duration`` after it last changed.
        self._seen: LeaseRecord | None = None
        self._seen_at = 0.0
        self._renewed_at = 0.0

    async def acquire(self, floor: int = 0) -> int:
        """Waits until this candidate holds the Lease; returns its term, which is
        above ``floor`` (the highest term the store has seen)."""
        while True:
            try:
                term = await self._attempt(floor)
            except Exception:
                log.exception("leader election: could not read or write the Lease; retrying")
                term = None
            if term is not None:
                log.info("leader election: %s leads, term %d", self.identity, term)
                return term
            await asyncio.sleep(self.timing.retry)

    async def hold(self) -> None:
        """Renews the Lease held (after :meth:`acquire`); returns once this holder
        is deposed: another holds it, or it could not be renewed for the renew
        deadline."""
        while True:
            await asyncio.sleep(self.timing.retry)
            started = self._clock()
            left = self._renewed_at + self.timing.renew_deadline - started
            if left <= 0:
                log.warning("leader election: could not renew the Lease in time; stepping down")
                return
            try:
                async with asyncio.timeout(left):
                    term = await self._attempt(floor=0)
            except TimeoutError:
                log.warning("leader election: could not renew the Lease in time; stepping down")
                return
            except Exception as exc:
                # Logged briefly: an unreachable apiserver fails every retry alike.
                log.warning("leader election: renewing the Lease failed (%r); retrying", exc)
                continue
            if term is None:
                log.warning("leader election: %s lost the Lease", self.identity)
                return

    async def release(self) -> None:
        """Gives the Lease up (if still held) so a successor need not wait for it to
        expire. Only after this holder's work has stopped."""
        current = await self.lease.get()
        if current is None or current.holder != self.identity:
            return
        with_nobody = replace(current, holder="", duration_seconds=1, renewed=datetime.now(UTC))
        try:
            await self.lease.replace(with_nobody)
        except LeaseConflict:
            return
        log.info("leader election: %s released the Lease", self.identity)

    async def _attempt(self, floor: int) -> int | None:
        """One try to take or renew the Lease: the term held, or None when another
        holds it (or wrote it first)."""
        started = self._clock()
        now = datetime.now(UTC)
        duration = round(self.timing.duration)
        current = await self.lease.get()
        if current is None:
            fresh = LeaseRecord(self.identity, duration, now, now, transitions=floor + 1)
            return await self._write(self.lease.create, fresh, started)
        if current != self._seen:
            self._seen, self._seen_at = current, self._clock()
        mine = current.holder == self.identity
        if not mine and current.holder and self._clock() - self._seen_at < current.duration_seconds:
            return None
        taken = replace(
            current,
            holder=self.identity,
            duration_seconds=duration,
            acquired=current.acquired if mine else now,
            renewed=now,
            transitions=current.transitions if mine else max(current.transitions, floor) + 1,
        )
        return await self._write(self.lease.replace, taken, started)

    async def _write(
        self,
        write: Callable[[LeaseRecord], Awaitable[LeaseRecord]],
        record: LeaseRecord,
        started: float,
    ) -> int | None:
        try:
            written = await write(record)
        except LeaseConflict:
            return None
        self._seen, self._seen_at = written, self._clock()
        # Counted from before the request: the apiserver may have taken its time.
        self._renewed_at = started
        return written.transitions
