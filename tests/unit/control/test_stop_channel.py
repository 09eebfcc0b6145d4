"""The stop channel's control side (``Control.requested_stops``): a long poll that
answers the Turns a runner process must stop as soon as a stop of them is accepted.

Issue 9 item 5: "The control plane pushes stop requests (turn interrupt, session
interrupt, cancel, deadline) to the runner over a channel it holds open".
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from helmr.control import TurnView
from helmr.errors import StaleEpoch
from helmr.states import ErrorInfo
from tests.unit.control.harness import Harness


async def test_a_poll_with_nothing_to_stop_answers_empty_when_its_timeout_ends(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)

    assert await h.control.requested_stops(session.id, epoch, [turn.id], timeout=0.05) == []


@pytest.mark.parametrize("scope", ["turn", "session", "cancel"])
async def test_an_accepted_stop_answers_a_waiting_poll_at_once(h: Harness, scope: str) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    poll = asyncio.create_task(h.control.requested_stops(session.id, epoch, [turn.id], timeout=10))
    await asyncio.sleep(0.05)
    assert not poll.done()  # it waits: nothing asked this Turn to stop yet

    if scope == "turn":
        await h.control.interrupt(session.id, turn.id)
    elif scope == "session":
        await h.control.interrupt(session.id)
    else:
        await h.control.cancel(session.id)

    assert await asyncio.wait_for(poll, 1) == [turn.id]
    # Accepted, not converged: the Turn still runs until its process lets go.
    assert (await h.control.get_turn(session.id, turn.id)).status == "running"


async def test_a_turn_ended_elsewhere_is_answered_too(h: Harness) -> None:
    """A Turn past its maxTurnDuration ends at once (turn_deadline_elapsed): its
    handler hears of it on the channel."""
    session = await h.session(max_turn_duration=timedelta(seconds=5))
    epoch, turn = await h.running(session.id)
    await h.control.expire_deadlines(h.clock.advance(timedelta(seconds=6)))

    assert await h.control.requested_stops(session.id, epoch, [turn.id], timeout=0) == [turn.id]


@pytest.mark.parametrize("outcome", ["complete", "fail"])
async def test_a_poll_ends_with_nothing_to_stop_once_its_process_settled_its_turn(
    h: Harness, outcome: str
) -> None:
    """A settlement is no stop (the handler's signal stays clear), and a process that
    runs no Turn holds no poll: the poll ends at once, empty."""
    session = await h.session()
    epoch, turn = await h.running(session.id)
    poll = asyncio.create_task(h.control.requested_stops(session.id, epoch, [turn.id], timeout=10))
    await asyncio.sleep(0.05)
    assert not poll.done()

    if outcome == "complete":
        await h.control.complete(session.id, epoch, turn.id, "done")
    else:
        error = ErrorInfo(code="actor_error", message="no")
        await h.control.fail(session.id, epoch, turn.id, error)

    assert await asyncio.wait_for(poll, 1) == []
    # Asked again for the settled Turn: answered at once, not at the timeout.
    asked = h.control.requested_stops(session.id, epoch, [turn.id], timeout=10)
    assert await asyncio.wait_for(asked, 1) == []


async def test_a_fenced_process_is_refused(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)

    with pytest.raises(StaleEpoch):
        await h.control.requested_stops(session.id, epoch + 1, [turn.id], timeout=0)


async def _settled_into_the_next(h: Harness, outcome: str) -> tuple[str, int, str, str]:
    """A process that settled its first Turn with a ``next`` that started the second:
    (session id, epoch, first Turn's id, second's)."""
    session = await h.session()
    epoch, first = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    if outcome == "complete":
        second = await h.control.complete_and_take_next(session.id, epoch, first.id, "done")
    else:
        error = ErrorInfo(code="actor_error", message="no")
        second = await h.control.fail_and_take_next(session.id, epoch, first.id, error)
    assert isinstance(second, TurnView)
    return session.id, epoch, first.id, second.id


@pytest.mark.parametrize("outcome", ["complete", "fail"])
async def test_a_poll_outlives_the_turn_its_process_settled_into_the_next(
    h: Harness, outcome: str
) -> None:
    """A busy process's one poll serves every Turn its settlements start (issue 31):
    its own settlement is no answer while it runs the next Turn, and a stop of that
    one answers that one's id, though the poll did not list it."""
    sid, epoch, first, second = await _settled_into_the_next(h, outcome)
    poll = asyncio.create_task(h.control.requested_stops(sid, epoch, [first], timeout=10))
    await asyncio.sleep(0.05)
    assert not poll.done()

    await h.control.interrupt(sid, second)

    assert await asyncio.wait_for(poll, 1) == [second]


async def test_a_poll_for_a_settled_turn_is_answered_once_its_process_runs_none(
    h: Harness,
) -> None:
    """The next Turn ended elsewhere (here its deadline) while the poll listed the one
    settled before it: the poll ends, empty (the settled one is no stop), and the
    runner asks about the one it holds."""
    session = await h.session(max_turn_duration=timedelta(seconds=5))
    epoch, first = await h.running(session.id)
    await h.control.enqueue(session.id, "next")
    second = await h.control.complete_and_take_next(session.id, epoch, first.id, "done")
    assert isinstance(second, TurnView)
    assert await h.control.requested_stops(session.id, epoch, [first.id], timeout=0) == []

    await h.control.expire_deadlines(h.clock.advance(timedelta(seconds=6)))

    assert await h.control.requested_stops(session.id, epoch, [first.id], timeout=0) == []
    assert await h.control.requested_stops(session.id, epoch, [second.id], timeout=0) == [second.id]
