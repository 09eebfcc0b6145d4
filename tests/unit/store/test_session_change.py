"""An event appended with a change to its Session's row (``timeline.append``'s
``session_change``): the change is written with the sequence, and also when the
event was there already (a repeat takes no sequence, but the change still holds)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from helmr.events import Event, EventKind, lifecycle_event_id
from helmr.store import SessionRow, Store, Tx, sessions, timeline
from tests.compose import new_session


@pytest.fixture
async def store(store_location: str | Path) -> AsyncIterator[Store]:
    async with await Store.open(store_location) as opened:
        yield opened


async def test_the_change_is_written_with_a_new_event_and_with_a_repeat(store: Store) -> None:
    session = await new_session(store)
    kind = EventKind.TURN_RUNNING
    event_id = lifecycle_event_id(session, kind, "t1")

    async def append(turn_id: str) -> Event:
        change = sessions.turn_starting(turn_id)
        return await store.write(
            lambda tx: timeline.append(
                tx, session, kind, {}, event_id=event_id, session_change=change
            )
        )

    first = await append("turn_a")
    after_first = await store.read(lambda rt: sessions.require(rt, session))
    again = await append("turn_b")  # a repeat: no new sequence, the change all the same
    after_again = await store.read(lambda rt: sessions.require(rt, session))
    following = await store.append_event(session, EventKind.TURN_OUTPUT, "x")
    assert after_first.active_turn_id == "turn_a"
    assert after_again.active_turn_id == "turn_b"
    assert again == first
    assert following.sequence == first.sequence + 1


async def test_an_append_answers_the_session_as_its_change_left_it(store: Store) -> None:
    session = await new_session(store)
    kind = EventKind.TURN_COMPLETED
    event_id = lifecycle_event_id(session, kind, "t1")
    start = sessions.turn_starting("t1")
    await store.write(
        lambda tx: timeline.append(tx, session, EventKind.TURN_RUNNING, {}, session_change=start)
    )

    async def append(awaiting_cut: int) -> SessionRow:
        change = sessions.turn_ending("t1", completed=True, awaiting_cut=awaiting_cut)

        def write(tx: Tx) -> SessionRow:
            row = timeline.append_unanswered(
                tx,
                session,
                kind,
                {},
                turn_id="t1",
                event_id=event_id,
                process_epoch=None,
                session_change=change,
                answering_session=True,
            )
            return sessions.loaded(tx, row)

        return await store.write(write)

    answered = await append(3)
    stored = await store.read(lambda rt: sessions.require(rt, session))
    assert answered == stored
    assert (answered.active_turn_id, answered.awaiting_cut) == (None, 3)
    event = await store.read(lambda rt: timeline.get(rt, event_id))
    assert event is not None
    assert answered.last_event_seq == event.sequence == 2
    # A repeat: no new sequence, the change all the same, and the Session answered.
    answered_again = await append(4)
    assert (answered_again.awaiting_cut, answered_again.last_event_seq) == (4, 2)
    following = await store.append_event(session, EventKind.TURN_OUTPUT, "x")
    assert following.sequence == event.sequence + 1
