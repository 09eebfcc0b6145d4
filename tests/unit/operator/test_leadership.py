"""The leader's work runs only while this replica leads (helmr.operator.leadership.leader):
started once elected with its term claimed in the store, cancelled and fenced
once deposed, and the Lease released when the process stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helmr.control.control import Control
from helmr.operator.leadership.leader import Leadership
from helmr.operator.leadership.lease import LeaderElector
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.server import StaticRunnerTokens, build_app
from helmr.server.auth import StaticAuthenticator
from helmr.store import Store
from helmr.store import leadership as terms
from helmr.store.leadership import Deposed, Term
from tests.unit.operator.memory_lease import TIMING, Clock, MemoryLease
from tests.unit.operator.stub_kube import StubKube


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(tmp_path / "helmr.db") as opened:
        yield opened


class Replica:
    def __init__(self, store: Store, lease: MemoryLease, name: str) -> None:
        self.deposed = asyncio.Event()
        self.leadership = Leadership(
            store, LeaderElector(lease, name, TIMING, clock=Clock()), on_deposed=self.deposed.set
        )
        self.control = Control(store, fence=self.leadership.fence)
        self.working = asyncio.Event()
        self.stopped = asyncio.Event()

    async def lead(self) -> None:
        self.working.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped.set()

    def gauge(self) -> float:
        [metric] = self.leadership.gauge.collect()
        return metric.samples[0].value


async def open_session(control: Control) -> None:
    await control.open_session(namespace="team", name="w", actor="a", workspace="w")


async def test_the_leader_works_in_its_claimed_term_until_deposed(store: Store) -> None:
    lease = MemoryLease()
    await store.write(lambda tx: terms.claim(tx, Term(6, "earlier")))
    replica = Replica(store, lease, "a")
    running = asyncio.ensure_future(replica.leadership.run(replica.lead))
    await asyncio.wait_for(replica.working.wait(), 1)
    assert replica.leadership.leading
    assert replica.gauge() == 1
    assert replica.leadership.term == Term(7, "a")  # above the store's term
    assert await store.read(terms.current) == Term(7, "a")
    await open_session(replica.control)

    assert lease.record is not None
    lease._store(replace(lease.record, holder="b", transitions=8))  # another took it
    await asyncio.wait_for(replica.deposed.wait(), 1)
    await running
    assert replica.stopped.is_set()
    assert not replica.leadership.leading
    assert replica.gauge() == 0
    with pytest.raises(Deposed):  # refused before the store's term even moved on
        await open_session(replica.control)


async def test_a_stopping_leader_releases_the_lease(store: Store) -> None:
    lease = MemoryLease()
    replica = Replica(store, lease, "a")
    running = asyncio.ensure_future(replica.leadership.run(replica.lead))
    await asyncio.wait_for(replica.working.wait(), 1)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert replica.stopped.is_set()
    assert lease.record is not None
    assert lease.record.holder == ""
    assert not replica.deposed.is_set()


async def test_without_an_elector_the_process_leads_unfenced(store: Store) -> None:
    leadership = Leadership(store, None, on_deposed=lambda: None)
    assert leadership.fence is None
    started = asyncio.Event()

    async def lead() -> None:
        started.set()

    await asyncio.wait_for(leadership.run(lead), 1)
    assert started.is_set()
    assert leadership.leading


@pytest.mark.parametrize("leading", [True, False])
async def test_readyz_says_whether_this_replica_leads(store: Store, leading: bool) -> None:
    app = build_app(
        Control(store), StaticAuthenticator({}), StaticRunnerTokens(), leading=lambda: leading
    )
    async with TestClient(TestServer(app)) as http, http.get("/readyz") as response:
        assert response.status == 200  # a replica that does not lead serves all the same
        assert await response.json() == {"status": "ok", "leader": leading}


def test_a_replica_that_does_not_lead_keeps_no_status_requests() -> None:
    # Nothing would take them: the leader's status sync hears of the same changes
    # from the store's change feed.
    leading = False
    mirror = CustomResourceMirror(StubKube(), followed=lambda: leading)
    mirror.request("ses_a", "turn_a")
    assert not mirror.requested.is_set()
    assert mirror.take_requests() == {}
    leading = True
    mirror.request("ses_a", "turn_a")
    assert mirror.requested.is_set()
    assert mirror.take_requests() == {"ses_a": {"turn_a"}}
