"""A held settlement's wait (runner protocol 5) does not ask again when woken by its
own settlement's commit, a write transaction that would find what the settlement found
(issue 31), and misses no commit after that settlement, on both stores: one published
before the wait's next watch, one in the settlement's own batch on SQLite (whose
writer publishes each write of a batch apart), one published before the settlement's
own (PostgreSQL's store threads answer in any order: ``Signals`` level, below)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest

from helmr.control import runner_api
from helmr.protocol.api import TurnView
from helmr.store import Tx
from helmr.store.signals import Signals
from tests.unit.control.harness import Harness


class _Line:
    """A held reply's connection, as the server sees it (``Connection``)."""

    connected = True


def _asked_again(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """One entry per attempt a wait makes after a wake-up (``_Receive.again``)."""
    asked: list[None] = []
    again = runner_api._Receive.again

    async def counted(self: runner_api._Receive) -> Any:
        asked.append(None)
        return await again(self)

    monkeypatch.setattr(runner_api._Receive, "again", counted)
    return asked


def _held(
    h: Harness,
    session_id: str,
    epoch: int,
    turn_id: str,
    holding: Callable[[], Awaitable[object]],
    settle: Callable[[], Awaitable[Any]] | None = None,
) -> asyncio.Future[Any]:
    settle = settle or partial(h.control.complete_and_take_next, session_id, epoch, turn_id)
    return asyncio.ensure_future(
        h.control.settle_and_receive(
            settle, session_id, epoch, 20, holding=holding, listening=_Line()
        )
    )


async def test_a_held_wait_does_not_ask_again_for_its_own_settlement(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    asked = _asked_again(monkeypatch)
    held_up = asyncio.Event()

    async def holding() -> None:
        held_up.set()

    held = _held(h, session.id, epoch, first.id, holding)
    await held_up.wait()
    await asyncio.sleep(0)  # the wait's next step, which asked again at once before
    assert asked == []
    second = await h.control.enqueue(session.id, "two")
    started = await held
    assert isinstance(started, TurnView)
    assert (started.id, started.status, len(asked)) == (second.id, "running", 1)


async def test_a_commit_to_another_session_does_not_make_a_held_wait_ask_again(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load, other Sessions' commits are published between the settlement's own
    and the wait's look (in the fleet at 5,000 Sessions, before each nearly every held
    wait asked again: a write transaction a Turn): they change nothing the settlement
    answered. A commit to the Session then still starts its Turn."""
    session, other = await h.session(), await h.session()
    epoch, first = await h.running(session.id)
    asked = _asked_again(monkeypatch)
    held_up = asyncio.Event()

    async def holding() -> None:
        await h.control.enqueue(other.id, "elsewhere")
        held_up.set()

    held = _held(h, session.id, epoch, first.id, holding)
    await held_up.wait()
    await asyncio.sleep(0)
    assert asked == []
    second = await h.control.enqueue(session.id, "two")
    started = await held
    assert isinstance(started, TurnView)
    assert (started.id, started.status, len(asked)) == (second.id, "running", 1)


async def test_a_turn_enqueued_as_the_held_reply_s_head_goes_is_started(h: Harness) -> None:
    """Committed and published after the settlement's publish, before the wait took its
    next watch: no watch of the wait's was there for it to set."""
    session = await h.session()
    epoch, first = await h.running(session.id)
    enqueued: list[TurnView] = []

    async def holding() -> None:
        enqueued.append(await h.control.enqueue(session.id, "two"))

    started = await _held(h, session.id, epoch, first.id, holding)
    assert isinstance(started, TurnView)
    assert (started.id, started.status) == (enqueued[0].id, "running")


@pytest.mark.parametrize("store_location", ["sqlite"], indirect=True)
async def test_a_turn_enqueued_in_the_settlement_s_own_batch_is_started(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's writer commits the writes waiting together: the settlement and, after
    it in the same commit, an enqueue the settlement did not see. Their wake-ups are
    two publishes, the enqueue's after: the wait asks again."""
    session = await h.session()
    epoch, first = await h.running(session.id)
    writer = h.store._backend._writer  # type: ignore[attr-defined]
    gate, busy = threading.Event(), threading.Event()

    def blocking(tx: Tx) -> None:
        busy.set()
        gate.wait()

    blocked = asyncio.ensure_future(h.store.write(blocking))
    await asyncio.to_thread(busy.wait)  # the writer runs it: what comes next waits
    queued = [asyncio.Event(), asyncio.Event()]  # the first write queued, the second
    submit = writer.submit

    def counted(fn: Callable[[Tx], Any]) -> Any:
        future = submit(fn)
        for event in queued:
            if not event.is_set():
                event.set()
                break
        return future

    monkeypatch.setattr(writer, "submit", counted)
    held_up = asyncio.Event()

    async def holding() -> None:
        held_up.set()

    settling = asyncio.ensure_future(h.control.complete_and_take_next(session.id, epoch, first.id))
    await queued[0].wait()  # the settlement queued first

    async def settle() -> Any:
        return await settling

    held = _held(h, session.id, epoch, first.id, holding, settle)
    enqueueing = asyncio.ensure_future(h.control.enqueue(session.id, "two"))
    await queued[1].wait()  # then the enqueue, behind it
    gate.set()
    await blocked
    second = await enqueueing
    started = await held
    assert isinstance(started, TurnView)
    assert (started.id, started.status) == (second.id, "running")


async def test_a_watch_set_before_a_waiter_s_own_publish_is_not_set_last() -> None:
    """What the wait relies on, as PostgreSQL's threads may order it: a commit after the
    settlement's, published before it, sets the watch first; the settlement's own
    publish then finds it set, and the wait asks again. And a commit to the Session
    after the waiter's own, before it looks, is seen too; one to another Session is not
    a change to the state the waiter's own write answered."""
    signals = Signals()
    with signals.watching("s") as watch:
        signals.publish(["s"])  # another commit's, first
        signals.publish(["s"])  # the waiter's own
        assert watch.is_set()
        assert not watch.set_last()
    with signals.watching("s") as watch:
        signals.publish(["s"])  # the waiter's own alone
        assert watch.set_last()
        signals.publish(["other"])  # another Session's commit: the state stands
        assert watch.set_last()
        signals.publish(["other", "s"])  # a later commit to the Session
        assert not watch.set_last()
    with signals.watching("s") as watch:
        assert not watch.set_last()  # not set at all
