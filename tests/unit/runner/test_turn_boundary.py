"""A busy runner's turn boundary (runner protocol 3, issue 31): ``complete`` and
``fail`` carry the runner's next ``receive``, so a runner with queued work makes one
request per turn; a turn so started that the actor never asks for goes back to the
queue; a burst of output is one request. A runner of the previous revision keeps
working against this control plane."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from helmr.errors import InvalidInput
from helmr.events import EventKind
from helmr.runner import Session
from tests.unit.api import Api
from tests.unit.runner.against_app import runner_session

LONE_SURROGATE = "\udfff"
"""JSON can carry it (escaped) but no store can write it: the server refuses it (400)."""


async def _serve(session: Session, turns: int) -> list[Any]:
    """The usual actor loop for ``turns`` turns: complete each, but fail input 2."""
    inputs = []
    for _ in range(turns):
        turn = await session.receive(timeout=5)
        assert turn is not None
        inputs.append(turn.input)
        if turn.input == 2:
            await turn.fail("two")
        else:
            await turn.complete({"echo": turn.input})
    return inputs


async def _kinds(api: Api, session_id: str, turn_id: str) -> list[str]:
    page = await api.control.list_events(session_id)
    return [e.kind for e in page.records if e.turn_id == turn_id]


@pytest.mark.parametrize(
    ("protocol", "calls"),
    [
        # The previous revision: a receive and a settlement per turn, as before.
        (2, ["receive", "complete"] * 2 + ["receive", "fail"] + ["receive", "complete"] * 2),
        # The first settlement asks for nothing (the actor has not yet asked for a
        # turn after settling one); from then on each settlement starts the next turn.
        (3, ["receive", "complete", "receive", "complete", "fail", "complete", "complete"]),
        # As 3; the last settlement's reply is held (the queue is empty), so the process's
        # end cuts it short and asks once more (a receive) for a turn it may have started.
        (
            5,
            [
                "receive",
                "complete",
                "receive",
                "complete",
                "fail",
                "complete",
                "complete",
                "receive",
            ],
        ),
    ],
)
async def test_a_busy_runner_makes_one_request_per_turn(
    api: Api, protocol: int, calls: list[str]
) -> None:
    sid = await api.start()
    ids = [await api.enqueue(sid, n) for n in range(5)]
    sent: list[str] = []
    async with runner_session(api, sid, protocol=protocol, sent=sent) as session:
        assert await _serve(session, 5) == [0, 1, 2, 3, 4]
    assert sent == calls
    for turn_id, n in zip(ids, range(5), strict=True):
        turn = await api.control.get_turn(sid, turn_id)
        assert turn.status == ("failed" if n == 2 else "completed")
        assert turn.result == (None if n == 2 else {"echo": n})
        assert await _kinds(api, sid, turn_id) == [
            EventKind.TURN_QUEUED,
            EventKind.TURN_RUNNING,
            EventKind.TURN_FAILED if n == 2 else EventKind.TURN_COMPLETED,
        ]


async def test_a_turn_the_actor_never_asked_for_goes_back_to_the_queue(api: Api) -> None:
    """``run`` ended after a settlement that started the next turn: the runner gives it
    back (the entrypoint does, ``give_back``), and it runs next, never lost or replayed."""
    sid = await api.start()
    ids = [await api.enqueue(sid, n) for n in range(3)]
    sent: list[str] = []
    async with runner_session(api, sid, sent=sent) as session:
        assert await _serve(session, 2) == [0, 1]  # the second settlement started turn 3
        assert (await api.control.get_turn(sid, ids[2])).status == "running"
        session.ask_no_more()
        await session.give_back()
        await session.give_back()  # nothing left to give back: no call
        assert (await api.control.get_turn(sid, ids[2])).status == "queued"
        assert sent[-1] == "release"
        assert sent.count("release") == 1
        again = await session.receive(timeout=5)
        assert again is not None
        assert again.id == ids[2]
        await again.complete()
    assert (await api.control.get_turn(sid, ids[2])).status == "completed"
    assert await _kinds(api, sid, ids[2]) == [
        EventKind.TURN_QUEUED,
        EventKind.TURN_RUNNING,
        EventKind.TURN_QUEUED,  # released: data says so
        EventKind.TURN_RUNNING,
        EventKind.TURN_COMPLETED,
    ]
    page = await api.control.list_events(sid)
    released = [e.data for e in page.records if e.turn_id == ids[2]][2]
    assert released == {
        "sequence": 3,
        "source": "api",
        "released": True,
        "processEpoch": (await api.control.get_session(sid)).process_epoch,
    }


async def test_a_receive_with_other_labels_gets_the_turn_started_with_them(api: Api) -> None:
    sid = await api.start()
    ids = [await api.enqueue(sid, n) for n in range(3)]
    sent: list[str] = []
    async with runner_session(api, sid, sent=sent) as session:
        await _serve(session, 2)  # the second settlement started turn 3 without labels
        third = await session.receive(timeout=5, tags=["late"])
        assert third is not None
        assert third.id == ids[2]
        await third.complete()
    # The last settlement's reply held, then cut short by the end: a receive follows.
    assert sent[-4:] == ["release", "receive", "complete", "receive"]
    page = await api.control.list_events(sid)
    running = [e.data for e in page.records if e.turn_id == ids[2]]
    epoch = (await api.control.get_session(sid)).process_epoch
    assert running[-2] == {"processEpoch": epoch, "tags": ["late"]}


@pytest.mark.parametrize(("protocol", "calls"), [(2, ["output"] * 5), (3, ["output/batch"])])
async def test_a_burst_of_output_is_one_request(api: Api, protocol: int, calls: list[str]) -> None:
    sid = await api.start()
    await api.enqueue(sid, "x")
    sent: list[str] = []
    async with runner_session(api, sid, protocol=protocol, sent=sent) as session:
        turn = await session.receive(timeout=5)
        assert turn is not None
        writes = [turn.output.write({"n": n}) for n in range(5)]
        await asyncio.gather(*writes)
        await turn.complete()
    assert sent == ["receive", *calls, "complete"]
    page = await api.control.list_events(sid)
    assert [e.data for e in page.records if e.kind == EventKind.TURN_OUTPUT] == [
        [{"type": "json", "json": {"n": n}}] for n in range(5)
    ]


async def test_a_refused_write_in_a_burst_fails_alone(api: Api) -> None:
    sid = await api.start()
    sent: list[str] = []
    async with runner_session(api, sid, sent=sent) as session:
        first = session.output.write("first")
        bad = session.output.write(LONE_SURROGATE)
        last = session.output.write("last")
        await first
        with pytest.raises(InvalidInput):
            await bad
        await last
    # The batch was refused whole (one transaction), then each write went alone.
    assert sent == ["output/batch", "output", "output", "output"]
    page = await api.control.list_events(sid)
    assert [e.data for e in page.records if e.kind == EventKind.TURN_OUTPUT] == [
        [{"type": "text", "text": "first"}],
        [{"type": "text", "text": "last"}],
    ]
