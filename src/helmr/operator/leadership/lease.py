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
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

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


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    """Empty: released, anyone may take it at once."""
    duration_seconds: int
    acquired: datetime | None
    renewed: datetime | None
    transitions: int
    version: str | None = None
    """The resourceVersion read: a replace of a record changed meanwhile conflicts."""


class LeaseConflict(Exception):
    """Another candidate wrote the Lease first."""


class LeaseApi(Protocol):
    async def get(self) -> LeaseRecord | None: ...
    async def create(self, record: LeaseRecord) -> LeaseRecord: ...
    async def replace(self, record: LeaseRecord) -> LeaseRecord: ...


class KubeLease:
    """One named Lease through the Kubernetes client (:class:`LeaseApi`)."""

    def __init__(
        self, api: client.ApiClient, namespace: str, name: str, *, timeout: float = 5.0
    ) -> None:
        self._api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self._timeout = timeout

    async def get(self) -> LeaseRecord | None:
        # The loop's default executor, not helmr.kube.threads: a renewal must not
        # wait behind the status mirror's and the supervisor's calls.
        try:
            lease = await asyncio.to_thread(
                self._api.read_namespaced_lease,
                self.name,
                self.namespace,
                _request_timeout=self._timeout,
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return _record(lease)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        return await self._write(self._api.create_namespaced_lease, self.namespace, record)

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        return await self._write(
            self._api.replace_namespaced_lease, self.name, self.namespace, record
        )

    async def _write(self, call: Callable[..., Any], *args: Any) -> LeaseRecord:
        *where, record = args
        try:
            lease = await asyncio.to_thread(
                call, *where, self._manifest(record), _request_timeout=self._timeout
            )
        except ApiException as e:
            if e.status == 409:
                raise LeaseConflict(str(e.reason)) from e
            raise
        return _record(lease)

    def _manifest(self, record: LeaseRecord) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record.version is not None:
            metadata["resourceVersion"] = record.version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": record.holder,
                "leaseDurationSeconds": record.duration_seconds,
                "acquireTime": _micro_time(record.acquired),
                "renewTime": _micro_time(record.renewed),
                "leaseTransitions": record.transitions,
            },
        }


def _micro_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: Any) -> LeaseRecord:
    spec = lease.spec or client.V1LeaseSpec()
    return LeaseRecord(
        holder=spec.holder_identity or "",
        duration_seconds=spec.lease_duration_seconds or 0,
        acquired=spec.acquire_time,
        renewed=spec.renew_time,
        transitions=spec.lease_transitions or 0,
        version=lease.metadata.resource_version,
    )


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
