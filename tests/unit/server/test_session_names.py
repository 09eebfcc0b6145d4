"""Where each Session is, kept by the API (helmr.server.session_names): every
Session open or closing in one read at start, any other once, and none read
again; so a restarted API checks runner tokens and authorises enqueues without
reading a Session."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from helmr.control import SessionName
from helmr.errors import NotFound
from helmr.server import SessionNames
from tests.unit.control.harness import Harness


def counting(h: Harness) -> Counter[str]:
    """The store's transactions by kind from now on."""
    transactions: Counter[str] = Counter()
    h.store.observe = lambda kind, lane, seconds: transactions.update((kind,))
    return transactions


async def test_loading_keeps_every_session_not_ended_in_one_read(h: Harness) -> None:
    a, b, closed, failed = [await h.session() for _ in range(4)]
    closing = await h.session()
    await h.control.process_started(closing.id)
    await h.control.enqueue(closing.id, "still to run")
    await h.control.close(closing.id)
    await h.control.close(closed.id)
    await h.control.fail_session(failed.id, "namespace_terminating")
    assert (await h.control.get_session(closing.id)).status == "closing"

    names = SessionNames(h.control)
    transactions = counting(h)
    await names.load()
    assert transactions == {"read": 1}
    for session in (a, b, closing):
        assert await names(session.id) == SessionName(session.namespace, session.name)
    assert transactions == {"read": 1}
    # An ended Session is read when asked for, once.
    assert await names(closed.id) == SessionName(closed.namespace, closed.name)
    assert await names(closed.id) == SessionName(closed.namespace, closed.name)
    assert transactions == {"read": 2}


async def test_a_session_opened_since_is_read_once_and_none_is_not_kept(h: Harness) -> None:
    names = SessionNames(h.control)
    await names.load()
    later = await h.session()
    transactions = counting(h)
    for _ in range(3):
        assert await names(later.id) == SessionName(later.namespace, later.name)
        with pytest.raises(NotFound):
            await names("ses_unknown")
    assert transactions == {"read": 4}


async def test_beyond_what_is_kept_the_oldest_are_forgotten(h: Harness) -> None:
    opened = []
    for _ in range(4):
        h.clock.advance(timedelta(seconds=1))  # opened one after another
        opened.append(await h.session())
    oldest, older, newer, newest = opened
    names = SessionNames(h.control, kept=2)
    await names.load()  # the newest two
    transactions = counting(h)
    await names(newest.id)
    await names(newer.id)
    assert transactions == {}
    await names(oldest.id)  # read, and the oldest kept (newer) forgotten for it
    await names(newest.id)
    assert transactions == {"read": 1}
    await names(newer.id)
    assert transactions == {"read": 2}
    assert older.id  # never asked for
