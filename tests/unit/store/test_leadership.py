"""Epoch fencing of the control plane's leader (helmr.store.leadership): a term
claimed in the store, and the leader's writes checked against it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from helmr.control.control import Control
from helmr.store import Store, Tx
from helmr.store import leadership as terms
from helmr.store.leadership import Deposed, Term
from helmr.store.schema import SCHEMA_VERSION
from tests.unit.store.raw import plain


@pytest.fixture
async def store(store_location: str | Path) -> AsyncIterator[Store]:
    async with await Store.open(store_location) as opened:
        yield opened


async def claim(store: Store, term: Term) -> None:
    await store.write(partial(terms.claim, term=term))


def fenced(store: Store, term: Term) -> Control:
    def fence(tx: Tx) -> None:
        terms.check(tx, term)

    return Control(store, fence=fence)


async def open_session(control: Control, name: str) -> str:
    view = await control.open_session(namespace="team", name=name, actor="a", workspace=name)
    return view.id


async def test_a_store_never_led_has_term_zero_until_one_is_claimed(store: Store) -> None:
    assert await store.read(terms.current) == Term(0, "")
    await claim(store, Term(3, "a"))
    assert await store.read(terms.current) == Term(3, "a")


@pytest.mark.parametrize("led_before", [False, True], ids=["never-led", "led"])
async def test_a_version_6_database_is_migrated_to_the_leader_term(
    store_location: str | Path, led_before: bool
) -> None:
    # Before version 7 the first replica to stand for leader created the table:
    # a version 6 database may have it, with a claimed term to keep, or not.
    async with await Store.open(store_location) as store:
        await claim(store, Term(3, "a"))
    with plain(store_location) as db:
        if not led_before:
            db.execute("DROP TABLE leader_term")
        db.drop_version_9()  # nor had it the columns of turn-aligned saves
        db.version = 6
    async with await Store.open(store_location) as store:
        assert await store.read(terms.current) == (Term(3, "a") if led_before else Term(0, ""))
    with plain(store_location) as db:
        assert db.version == SCHEMA_VERSION


async def test_the_leaders_writes_commit_while_its_term_is_current(store: Store) -> None:
    await claim(store, Term(1, "a"))
    session_id = await open_session(fenced(store, Term(1, "a")), "w")
    assert (await Control(store).get_session(session_id)).name == "w"


async def test_a_deposed_leaders_write_is_refused_and_rolled_back(store: Store) -> None:
    await claim(store, Term(1, "a"))
    old = fenced(store, Term(1, "a"))
    await claim(store, Term(2, "b"))
    with pytest.raises(Deposed):
        await open_session(old, "w")
    # Nothing of the refused transaction stayed: the same session opens afresh.
    opened = await open_session(fenced(store, Term(2, "b")), "w")
    assert (await Control(store).get_session(opened)).name == "w"


async def test_a_term_not_above_the_claimed_one_cannot_be_claimed(store: Store) -> None:
    await claim(store, Term(5, "a"))
    for stale in (Term(5, "b"), Term(4, "b")):
        with pytest.raises(Deposed):
            await claim(store, stale)
    await claim(store, Term(5, "a"))  # the holder claiming again is no change
    assert await store.read(terms.current) == Term(5, "a")


async def test_same_number_other_holder_is_not_the_leader(store: Store) -> None:
    await claim(store, Term(1, "a"))
    with pytest.raises(Deposed):
        await open_session(fenced(store, Term(1, "b")), "w")
