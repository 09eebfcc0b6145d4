"""Leader election over a Lease (helmr.operator.leadership.lease), against an in-memory
Lease with the apiserver's optimistic concurrency (resourceVersion) and a clock
the test moves."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from helmr.operator.leadership.lease import LeaderElector, LeaseTiming
from tests.unit.operator.memory_lease import TIMING, Clock, MemoryLease


@pytest.fixture
def lease() -> MemoryLease:
    return MemoryLease()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def candidate(lease: MemoryLease, clock: Clock, name: str) -> LeaderElector:
    return LeaderElector(lease, name, TIMING, clock=clock)


async def leading(lease: MemoryLease, clock: Clock) -> asyncio.Future[None]:
    """Candidate ``a`` holding the Lease: the future of its renewals."""
    holder = candidate(lease, clock, "a")
    await holder.acquire()
    return asyncio.ensure_future(holder.hold())


async def still_waiting(task: asyncio.Task[int]) -> bool:
    await asyncio.sleep(0.1)  # many retries
    return not task.done()


async def test_the_first_candidate_creates_the_lease_above_the_stores_term(
    lease: MemoryLease, clock: Clock
) -> None:
    assert await candidate(lease, clock, "a").acquire(floor=4) == 5
    assert lease.record is not None
    assert (lease.record.holder, lease.record.duration_seconds) == ("a", 15)


async def test_a_held_lease_is_taken_only_after_its_duration_without_renewal(
    lease: MemoryLease, clock: Clock
) -> None:
    assert await candidate(lease, clock, "a").acquire() == 1
    taking = asyncio.ensure_future(candidate(lease, clock, "b").acquire())
    assert await still_waiting(taking)
    clock.now += 14.9
    assert await still_waiting(taking)
    clock.now += 0.2
    assert await taking == 2
    assert lease.record is not None
    assert lease.record.holder == "b"


async def test_renewals_keep_the_lease_from_a_candidate(lease: MemoryLease, clock: Clock) -> None:
    holding = await leading(lease, clock)
    taking = asyncio.ensure_future(candidate(lease, clock, "b").acquire())
    for _ in range(10):  # 50 s in 5 s steps, the holder renewing between them
        clock.now += 5
        assert await still_waiting(taking)
    assert not holding.done()
    holding.cancel()
    taking.cancel()


async def test_a_takeover_counts_above_the_stores_term(lease: MemoryLease, clock: Clock) -> None:
    await candidate(lease, clock, "a").acquire()
    taking = asyncio.ensure_future(candidate(lease, clock, "b").acquire(floor=7))
    await asyncio.sleep(0.05)
    clock.now += 16
    assert await taking == 8


async def test_the_holder_steps_down_when_another_took_the_lease(
    lease: MemoryLease, clock: Clock
) -> None:
    holding = await leading(lease, clock)
    assert lease.record is not None
    lease._store(replace(lease.record, holder="b", transitions=2))
    await asyncio.wait_for(holding, 1)


async def test_the_holder_steps_down_when_it_cannot_renew_by_the_deadline(
    lease: MemoryLease, clock: Clock
) -> None:
    holding = await leading(lease, clock)
    lease.failing = True
    clock.now += 9.9
    await asyncio.sleep(0.1)
    assert not holding.done()  # still within the renew deadline: it keeps trying
    clock.now += 0.2
    await asyncio.wait_for(holding, 1)


async def test_a_released_lease_is_taken_at_once(lease: MemoryLease, clock: Clock) -> None:
    holder = candidate(lease, clock, "a")
    await holder.acquire()
    await holder.release()
    assert await asyncio.wait_for(candidate(lease, clock, "b").acquire(), 1) == 2


def test_timing_must_step_down_before_anyone_may_take_over() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseTiming(duration=10, renew_deadline=10, retry=2)
