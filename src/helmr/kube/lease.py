"""One ``coordination.k8s.io`` Lease, read and written through the Kubernetes client:
what the leader election (:mod:`helmr.operator.leadership.lease`) asks of it.

Its calls run on the loop's default executor with a timeout, not on
:mod:`helmr.kube.threads`, so a renewal never waits behind the other calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from helmr.kube.errors import Conflict, NotFound, translating


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


class KubeLease:
    """One named Lease through the Kubernetes client (the leader election's ``LeaseApi``)."""

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
                translating(self._api.read_namespaced_lease),
                self.name,
                self.namespace,
                _request_timeout=self._timeout,
            )
        except NotFound:
            return None
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
                translating(call), *where, self._manifest(record), _request_timeout=self._timeout
            )
        except Conflict as e:
            raise LeaseConflict(e.reason) from e
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
