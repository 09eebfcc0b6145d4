"""Warm pools in the state machine: a new Session's first process adopts a pooled pod."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from helmr.control.adoptions import AdoptedDisk
from tests.unit.control.harness import Harness
from tests.unit.control.pooled import DISK, MIB, pooled


async def test_adoption_registers_the_process_prepared_and_the_disk(h: Harness) -> None:
    session = await h.session()
    assert await h.control.adopt(session.id, 1, pooled(), DISK)

    state = await h.control.get_session(session.id)
    assert (state.process_epoch, state.process_live) == (1, True)
    # Its pod runs already: no preparation deadline can fail it.
    assert (
        await h.control.overdue_preparations(h.clock() + h.control._config.preparation_timeout * 2)
        == []
    )
    adoption = await h.control.adopted_pod(session.id, 1)
    assert adoption is not None
    assert (adoption.pod_name, adoption.session_id, adoption.epoch) == (
        "reviewer-pool-1",
        session.id,
        1,
    )
    workspace = await h.control.get_workspace("team", session.workspace)
    assert workspace.claim_name == "reviewer-pool-1"
    # Its first Turn runs on it at once.
    await h.control.enqueue(session.id, "go")
    turn = await h.control.receive(session.id, 1, timeout=0)
    assert turn is not None


async def test_adoption_stores_the_disks_thresholds_and_save_policy_with_it(
    h: Harness,
) -> None:
    """What a cold start's disk preparation stores commits with the adoption: no crash
    after it leaves the first process unmeasured against its thresholds."""
    session = await h.session()
    assert await h.control.adopt(session.id, 1, pooled(), DISK)
    assert await h.control.report_storage(session.id, 1, 60 * MIB) == "paused"
    disk = await h.control.current_disk("team", session.workspace)
    assert (disk.aligned, disk.save_interval, disk.first_claim) == (
        True,
        timedelta(seconds=30),
        "reviewer-pool-1",
    )


async def test_a_new_workspace_forgets_what_the_store_knew_of_an_older_one(h: Harness) -> None:
    """Its resource made anew by the adopter (an older one deleted with kubectl): the
    older disk is no obstacle, and is gone."""
    session = await h.session()
    await h.control.current_disk("team", session.workspace)
    fresh = AdoptedDisk(DISK.storage, DISK.aligned, DISK.save_interval, new_workspace=True)
    assert await h.control.adopt(session.id, 1, pooled(), fresh)
    workspace = await h.control.get_workspace("team", session.workspace)
    assert workspace.claim_name == "reviewer-pool-1"


async def test_a_pod_is_adopted_once(h: Harness) -> None:
    first, second = await h.session(), await h.session()
    assert await h.control.adopt(first.id, 1, pooled(), DISK)
    assert not await h.control.adopt(second.id, 1, pooled(), DISK)
    assert (await h.control.get_session(second.id)).process_epoch == 0
    assert await h.control.adopted_pod(second.id, 1) is None


async def test_a_workspace_with_a_disk_never_takes_a_pooled_pod(h: Harness) -> None:
    session = await h.session()
    await h.control.current_disk("team", session.workspace)  # a cold start made its disk
    assert not await h.control.adopt(session.id, 1, pooled(), DISK)
    assert (await h.control.get_session(session.id)).process_epoch == 0


async def test_a_later_process_never_takes_a_pooled_pod(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    await h.control.process_exited(session.id, epoch, 0)
    # Its epoch is not the next one: refused whatever the Workspace.
    assert not await h.control.adopt(session.id, epoch, pooled(), DISK)


async def test_the_pods_adoption_poll_is_answered_at_its_commit(h: Harness) -> None:
    session = await h.session()
    poll = asyncio.create_task(h.control.adoption("uid-1", 30))
    await asyncio.sleep(0.05)
    assert not poll.done()
    assert await h.control.adopt(session.id, 1, pooled(), DISK)
    adoption = await asyncio.wait_for(poll, 5)
    assert adoption is not None
    assert (adoption.session_id, adoption.epoch) == (session.id, 1)
    # Another pod's poll times out with nothing.
    assert await h.control.adoption("uid-2", 0.01) is None


async def test_an_adoption_is_no_session_change_in_the_feed(h: Harness) -> None:
    session = await h.session()
    await h.control.changed_sessions(timeout=0)
    assert await h.control.adopt(session.id, 1, pooled(), DISK)
    assert await h.control.changed_sessions(timeout=1) == {session.id}
