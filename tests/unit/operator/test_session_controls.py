"""Declarative Session controls (issue 12): spec.state and spec.resume are levels
applied any number of times, spec.interrupt is a request applied once, and a
resume names the hold it releases."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.operator.kopf.session_controls import NotYet, Refused, apply_spec
from helmr.resources import SessionSpec
from tests.unit.control.harness import Harness


async def apply(h: Harness, session_id: str, spec: SessionSpec, *, interrupt: bool) -> None:
    """As the handlers do: the Session read, then its spec applied to that view."""
    await apply_spec(h.control, await h.control.get_session(session_id), spec, interrupt=interrupt)


def spec(**controls: Any) -> SessionSpec:
    return SessionSpec.model_validate({"actorRef": {"name": "echo"}, "workspace": "ws", **controls})


async def test_closed_drains_and_repeats_harmlessly(h: Harness) -> None:
    session = await h.session()
    await h.control.enqueue(session.id, "queued")
    for _ in range(2):
        await apply(h, session.id, spec(state="Closed"), interrupt=False)
        view = await h.control.get_session(session.id)
        assert (view.status, view.queued_turns) == ("closing", 1)
    assert view.cancel_requested_at is None


async def test_cancelled_cancels_once_even_after_close(h: Harness) -> None:
    session = await h.session()
    await apply(h, session.id, spec(state="Closed"), interrupt=False)
    for _ in range(2):
        await apply(h, session.id, spec(state="Cancelled"), interrupt=False)
    view = await h.control.get_session(session.id)
    assert view.status == "closed"
    assert view.closed_how == "close"  # an idle Session closes at once; nothing left to cancel
    other = await h.session()
    await h.control.enqueue(other.id, "queued")
    for _ in range(2):
        await apply(h, other.id, spec(state="Cancelled"), interrupt=False)
    view = await h.control.get_session(other.id)
    assert (view.status, view.closed_how) == ("closed", "cancel")


async def test_an_interrupt_applies_only_as_a_new_request(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)
    await apply(h, session.id, spec(interrupt="one"), interrupt=False)
    assert (await h.control.get_session(session.id)).hold is None
    await apply(h, session.id, spec(interrupt="one"), interrupt=True)
    hold = (await h.control.get_session(session.id)).hold
    assert hold is not None
    assert hold.reason == "interrupt"

    # Not converged yet (the Turn still stops): the resume waits.
    resume = spec(interrupt="one", resume={"holdId": hold.hold_id})
    with pytest.raises(NotYet):
        await apply(h, session.id, resume, interrupt=False)
    await h.control.process_exited(session.id, epoch, 0)
    for _ in range(2):
        await apply(h, session.id, resume, interrupt=False)
        assert (await h.control.get_session(session.id)).hold is None


async def test_an_old_resume_never_releases_a_newer_hold(h: Harness) -> None:
    session = await h.session()
    first = await h.control.interrupt(session.id)
    await h.control.resume(session.id, first.hold_id)
    second = await h.control.interrupt(session.id)
    stale = spec(resume={"holdId": first.hold_id})
    with pytest.raises(Refused, match=f"its hold is {second.hold_id}"):
        await apply(h, session.id, stale, interrupt=False)
    view = await h.control.get_session(session.id)
    assert view.hold is not None
    assert view.hold.hold_id == second.hold_id


async def test_a_spec_that_asks_nothing_costs_no_transaction(h: Harness) -> None:
    """What kopf's resume of every Session after a restart comes to: the view the
    handler read, and nothing more (at 5,000 Sessions each read counts)."""
    session = await h.session()
    view = await h.control.get_session(session.id)
    transactions: list[str] = []
    h.store.observe = lambda kind, lane, seconds: transactions.append(kind)
    await apply_spec(h.control, view, spec(), interrupt=False)
    assert transactions == []
    await apply_spec(h.control, view, spec(state="Closed"), interrupt=False)
    assert "write" in transactions
