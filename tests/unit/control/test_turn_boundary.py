"""One transaction per turn boundary (issue 31): settling Turn N and starting N+1
together (``complete_and_take_next``, ``fail_and_take_next``), and giving a Turn so
started back (``release``), on both stores, with concurrent writers on the Session."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from helmr.control import runner_api
from helmr.errors import TurnNotActive
from helmr.states import ErrorInfo
from tests.unit.control.harness import Harness

TURNS = 12


async def test_a_boundary_settles_and_starts_in_one_go(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    second = await h.control.enqueue(session.id, "two")
    started = await h.control.fail_and_take_next(
        session.id, epoch, first.id, ErrorInfo(code="e", message="no"), tags=["t"]
    )
    assert not isinstance(started, str)
    assert started is not None
    assert (started.id, started.status) == (second.id, "running")
    assert (await h.control.get_turn(session.id, first.id)).status == "failed"
    # Nothing queued: the settlement starts nothing and waits for nothing.
    assert await h.control.complete_and_take_next(session.id, epoch, second.id) is None
    # Repeated (a lost reply), it answers as before: the Turn it started, or none.
    assert await h.control.complete_and_take_next(session.id, epoch, second.id) is None
    events = await h.events(session.id)
    assert [e.data for e in events if e.kind == "turn.running"][-1] == {
        "processEpoch": epoch,
        "tags": ["t"],
    }


async def test_a_boundary_during_closing_drains_the_session(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.close(session.id)
    assert await h.control.complete_and_take_next(session.id, epoch, turn.id) == "drained"


async def test_turn_and_event_sequences_stay_gapless_under_concurrent_writers(
    h: Harness,
) -> None:
    """Clients enqueue while the runner settles and starts Turns in single
    transactions: every Turn runs once, in order, and the sequences have no gap."""
    session = await h.session()
    epoch, turn = await h.running(session.id, 0)

    async def enqueue(n: int) -> None:
        await h.control.enqueue(session.id, n)

    async def runner() -> list[str]:
        ran = [turn.id]
        current = turn.id
        while len(ran) < TURNS + 1:
            started = await h.control.complete_and_take_next(session.id, epoch, current)
            if started is None:  # nothing queued yet: a receive would wait
                started = await h.control.receive(session.id, epoch, timeout=5)
            assert started is not None
            assert not isinstance(started, str)
            ran.append(started.id)
            current = started.id
        await h.control.complete(session.id, epoch, current)
        return ran

    running = asyncio.create_task(runner())
    await asyncio.gather(*(enqueue(n) for n in range(1, TURNS + 1)))
    ran = await running
    assert len(set(ran)) == len(ran)
    turns = [await h.control.get_turn(session.id, turn_id) for turn_id in ran]
    assert [t.sequence for t in turns] == list(range(1, TURNS + 2))
    assert {t.status for t in turns} == {"completed"}
    events = await h.events(session.id)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))


async def test_a_released_turn_runs_next_and_keeps_its_place(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    second = await h.control.enqueue(session.id, "two")
    third = await h.control.enqueue(session.id, "three")
    started = await h.control.complete_and_take_next(session.id, epoch, first.id)
    assert started is not None
    assert not isinstance(started, str)
    await h.control.release(session.id, epoch, second.id)
    await h.control.release(session.id, epoch, second.id)  # again: nothing changes
    view = await h.control.get_turn(session.id, second.id)
    assert (view.status, view.epoch, view.started_at) == ("queued", None, None)
    assert (await h.control.get_session(session.id)).queued_turns == 2
    # Another process (this one ended) runs it before the third.
    await h.control.process_exited(session.id, epoch, 0)
    again = await h.control.process_started(session.id)
    taken = await h.control.receive(session.id, again, timeout=0)
    assert taken is not None
    assert taken.id == second.id
    kinds = [e.kind for e in await h.events(session.id) if e.turn_id == second.id]
    assert kinds == ["turn.queued", "turn.running", "turn.queued", "turn.running"]
    assert third.status == "queued"


async def test_a_stop_accepted_before_the_release_wins(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    await h.control.enqueue(session.id, "two")
    started = await h.control.complete_and_take_next(session.id, epoch, first.id)
    assert started is not None
    assert not isinstance(started, str)
    await h.control.cancel(session.id)
    with pytest.raises(TurnNotActive):
        await h.control.release(session.id, epoch, started.id)


class _Line:
    """A held reply's connection, as the server sees it (``Connection``)."""

    connected = True


async def test_a_held_wait_s_late_start_starts_no_turn_its_runner_gave_back(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held settlement's wait (revision 5) woken by a commit while its runner was
    still there, its start of a Turn then slow to run (a PostgreSQL store thread
    under load): meanwhile the runner's ``run`` ended, it cut the reply short, its
    sweep ``receive`` started the Turn and it gave that back (``give_back``). The
    held wait's start, run last, must not start it again for a process that asks
    for no more: it stays queued for the next."""
    session = await h.session()
    epoch, first = await h.running(session.id)
    committed, woken, slow, ran = (asyncio.Event() for _ in range(4))
    take_next = runner_api._Receive.take_next

    async def slow_when_held(asked: runner_api._Receive, **how: bool) -> object:
        """The held wait's first start after its settlement waits for ``slow``."""
        if not committed.is_set() or woken.is_set() or asked._tags != ["held"]:
            return await take_next(asked, **how)
        woken.set()
        await slow.wait()
        try:
            return await take_next(asked, **how)
        finally:
            ran.set()

    monkeypatch.setattr(runner_api._Receive, "take_next", slow_when_held)
    line = _Line()

    async def holding() -> None:
        committed.set()

    settle = partial(h.control.complete_and_take_next, session.id, epoch, first.id, tags=["held"])
    held = asyncio.ensure_future(
        h.control.settle_and_receive(
            settle, session.id, epoch, 60, holding=holding, listening=line, tags=["held"]
        )
    )
    await committed.wait()
    third = await h.control.enqueue(session.id, "three")
    await woken.wait()  # the held wait is starting a Turn, slowly
    line.connected = False  # the runner cut its held reply short
    swept = await h.control.receive(session.id, epoch, timeout=0.001)
    assert swept is not None
    assert swept.id == third.id
    await h.control.release(session.id, epoch, third.id)
    slow.set()
    await ran.wait()
    held.cancel()
    await asyncio.gather(held, return_exceptions=True)
    assert (await h.control.get_turn(session.id, third.id)).status == "queued"
    kinds = [e.kind for e in await h.events(session.id) if e.turn_id == third.id]
    assert kinds == ["turn.queued", "turn.running", "turn.queued"]
