"""Leader election between control-plane replicas against the real apiserver: one
Lease, two candidates (helmr.operator.leadership.leader over helmr.operator.leadership.lease).

A leader cut off from the apiserver (its Lease calls fail, as in a network
partition; the apiserver itself is real) stops renewing: it steps down after the
renew deadline, and the other candidate takes over within the Lease's duration
of the last renewal. The deposed leader's store writes are refused by its term
(epoch fencing). A leader that stops gracefully releases the Lease, and a
successor takes it at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes import client

from helmr.control.control import Control
from helmr.kube.lease import KubeLease, LeaseRecord
from helmr.operator.leadership.leader import Leadership
from helmr.operator.leadership.lease import LeaderElector, LeaseTiming
from helmr.store import Store, Tx
from helmr.store import leadership as terms
from helmr.store.leadership import Deposed, Term

LEASE = "helmr-leader"
TIMING = LeaseTiming(duration=4, renew_deadline=3, retry=0.5)
# Scheduling and apiserver round trips on a busy 2-core machine.
SLACK = 1.5


class PartitionableLease:
    """The real Lease through the Kubernetes client, unless this candidate is cut off."""

    def __init__(self, lease: KubeLease) -> None:
        self._lease = lease
        self.cut_off = False
        self.renewed_at = 0.0
        """When a write of this candidate last succeeded (monotonic)."""

    async def get(self) -> LeaseRecord | None:
        self._reachable()
        return await self._lease.get()

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._reachable()
        return self._wrote(await self._lease.create(record))

    async def replace(self, record: LeaseRecord) -> LeaseRecord:
        self._reachable()
        return self._wrote(await self._lease.replace(record))

    def _reachable(self) -> None:
        if self.cut_off:
            raise ConnectionError("partitioned from the apiserver")

    def _wrote(self, record: LeaseRecord) -> LeaseRecord:
        self.renewed_at = time.monotonic()
        return record


class Replica:
    def __init__(self, api: client.ApiClient, namespace: str, store: Store, name: str) -> None:
        self.lease = PartitionableLease(KubeLease(api, namespace, LEASE))
        self.deposed = asyncio.Event()
        self.leadership = Leadership(
            store, LeaderElector(self.lease, name, TIMING), on_deposed=self.deposed.set
        )
        self.control = Control(store, fence=self.leadership.fence)
        self.working = False
        self._run: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._run = asyncio.create_task(self.leadership.run(self._lead))

    async def stop(self) -> None:
        if self._run is not None and not self._run.done():
            self._run.cancel()
        if self._run is not None:
            await asyncio.gather(self._run, return_exceptions=True)

    async def _lead(self) -> None:
        self.working = True
        try:
            await asyncio.Event().wait()
        finally:
            self.working = False


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "helmr.db") as opened:
        yield opened


@pytest.fixture
async def replicas(
    api_client: client.ApiClient, namespace: str, store: Store
) -> AsyncIterator[list[Replica]]:
    started = [Replica(api_client, namespace, store, name) for name in ("a", "b", "c")]
    yield started
    for replica in started:
        await replica.stop()


def read_lease(api_client: client.ApiClient, namespace: str) -> client.V1Lease:
    lease: client.V1Lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        LEASE, namespace
    )
    return lease


async def open_session(control: Control, name: str) -> None:
    await control.open_session(namespace="team", name=name, actor="a", workspace=name)


async def elected(replica: Replica, within: float) -> None:
    await asyncio.wait_for(replica.leadership.elected.wait(), within)


async def lead_with_a_candidate(leader: Replica, candidate: Replica, standing: float) -> None:
    """``leader`` elected first, then ``candidate`` standing by for ``standing`` seconds."""
    leader.start()
    await elected(leader, TIMING.retry + SLACK)
    candidate.start()
    await asyncio.sleep(standing)
    assert not candidate.leadership.elected.is_set()
    assert leader.leadership.leading


async def test_a_cut_off_leader_is_replaced_within_the_lease_duration_and_fenced(
    api_client: client.ApiClient, namespace: str, store: Store, replicas: list[Replica]
) -> None:
    a, b, _ = replicas
    # b stands by while a renews, for longer than the Lease's duration.
    await lead_with_a_candidate(a, b, TIMING.duration * 1.5)
    assert a.working
    held = read_lease(api_client, namespace).spec
    assert held.holder_identity == "a"
    old_term = a.leadership.term
    assert old_term is not None
    assert held.lease_transitions == old_term.number
    await open_session(a.control, "first")  # the leader's writes commit

    a.lease.cut_off = True
    last_renewal = a.lease.renewed_at
    await asyncio.wait_for(a.deposed.wait(), TIMING.renew_deadline + SLACK)
    stepped_down = time.monotonic() - last_renewal
    assert not a.working
    assert not a.leadership.leading
    await elected(b, TIMING.duration + TIMING.retry + SLACK)
    took_over = time.monotonic() - last_renewal
    # a stopped before b could start: never two leaders at once.
    assert stepped_down < TIMING.duration <= took_over < TIMING.duration + TIMING.retry + SLACK

    new_term = b.leadership.term
    assert new_term is not None
    assert new_term.number > old_term.number
    assert await store.read(terms.current) == new_term
    assert read_lease(api_client, namespace).spec.holder_identity == "b"
    # The deposed leader's writes are refused: by its own Control, and by one
    # that still believed in the old term (a leader that never noticed).
    with pytest.raises(Deposed):
        await open_session(a.control, "deposed")

    def still_believing(tx: Tx) -> None:
        terms.check(tx, Term(old_term.number, old_term.holder))

    with pytest.raises(Deposed):
        await open_session(Control(store, fence=still_believing), "unaware")
    await open_session(b.control, "deposed")  # the new leader's do


async def test_a_stopping_leader_releases_the_lease_to_a_waiting_candidate(
    api_client: client.ApiClient, namespace: str, replicas: list[Replica]
) -> None:
    _, b, c = replicas
    await lead_with_a_candidate(b, c, TIMING.retry * 2)
    released = time.monotonic()
    await b.stop()
    assert not b.working
    # Released, not expired: c's next attempt takes it.
    await elected(c, TIMING.retry + SLACK)
    assert time.monotonic() - released < TIMING.duration
    assert read_lease(api_client, namespace).spec.holder_identity == "c"
    assert not b.deposed.is_set()
