"""Declarative Session controls (issue 12): spec.state and spec.resume are levels
applied any number of times, spec.interrupt is a request applied once, and a
resume names the hold it releases. A control the Session cannot take is refused
when it is asked (issue 25, item 2), and only then."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from helmr.operator.kopf.session_controls import NotYet, apply_spec
from helmr.operator.mirror.refusals import Refusal
from helmr.resources import DeclaredControl, SessionSpec
from tests.unit.control.harness import Harness

EVERY: tuple[DeclaredControl, ...] = ("spec.state", "spec.interrupt", "spec.resume")
LEVELS: tuple[DeclaredControl, ...] = ("spec.state", "spec.resume")


async def apply(
    h: Harness, session_id: str, spec: SessionSpec, *, asked: Collection[DeclaredControl] = ()
) -> list[Refusal]:
    """As the handlers do: the Session read, then its spec applied to that view."""
    view = await h.control.get_session(session_id)
    return await apply_spec(h.control, view, spec, asked=asked)


def spec(**controls: Any) -> SessionSpec:
    return SessionSpec.model_validate({"actorRef": {"name": "echo"}, "workspace": "ws", **controls})


async def test_closed_drains_and_repeats_harmlessly(h: Harness) -> None:
    session = await h.session()
    await h.control.enqueue(session.id, "queued")
    for _ in range(2):
        assert await apply(h, session.id, spec(state="Closed"), asked=LEVELS) == []
        view = await h.control.get_session(session.id)
        assert (view.status, view.queued_turns) == ("closing", 1)
    assert view.cancel_requested_at is None


async def test_cancelled_cancels_once_and_is_refused_after_close(h: Harness) -> None:
    session = await h.session()
    await apply(h, session.id, spec(state="Closed"), asked=LEVELS)
    cancelled = spec(state="Cancelled")
    # An idle Session closes at once: nothing is left to cancel, and asking says so.
    [refused] = await apply(h, session.id, cancelled, asked=LEVELS)
    assert refused == Refusal(
        "spec.state",
        "SessionClosed",
        "spec.state Cancelled: the Session is closed (after its queued Turns finished);"
        " nothing cancelled",
    )
    # Applied again (a restart, another field's change), the level refuses nothing new.
    assert await apply(h, session.id, cancelled) == []
    view = await h.control.get_session(session.id)
    assert (view.status, view.closed_how) == ("closed", "close")
    other = await h.session()
    await h.control.enqueue(other.id, "queued")
    for _ in range(2):
        assert await apply(h, other.id, cancelled, asked=LEVELS) == []
    view = await h.control.get_session(other.id)
    assert (view.status, view.closed_how) == ("closed", "cancel")


async def test_an_interrupt_applies_only_as_a_new_request(h: Harness) -> None:
    session = await h.session()
    epoch, _ = await h.running(session.id)
    await apply(h, session.id, spec(interrupt="one"), asked=LEVELS)
    assert (await h.control.get_session(session.id)).hold is None
    await apply(h, session.id, spec(interrupt="one"), asked=EVERY)
    hold = (await h.control.get_session(session.id)).hold
    assert hold is not None
    assert hold.reason == "interrupt"

    # Not converged yet (the Turn still stops): the resume waits.
    resume = spec(interrupt="one", resume={"holdId": hold.hold_id})
    with pytest.raises(NotYet):
        await apply(h, session.id, resume, asked=LEVELS)
    await h.control.process_exited(session.id, epoch, 0)
    for _ in range(2):
        await apply(h, session.id, resume, asked=LEVELS)
        assert (await h.control.get_session(session.id)).hold is None


async def test_an_old_resume_never_releases_a_newer_hold(h: Harness) -> None:
    session = await h.session()
    first = await h.control.interrupt(session.id)
    await h.control.resume(session.id, first.hold_id)
    second = await h.control.interrupt(session.id)
    stale = spec(resume={"holdId": first.hold_id})
    [refused] = await apply(h, session.id, stale, asked=LEVELS)
    assert refused == Refusal(
        "spec.resume",
        "HoldMismatch",
        f"spec.resume.holdId {first.hold_id} is not the Session's hold"
        f" (its hold is {second.hold_id}); nothing resumed",
    )
    assert await apply(h, session.id, stale) == []  # not asked again: not refused again
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
    await apply_spec(h.control, view, spec(), asked=LEVELS)
    assert transactions == []
    await apply_spec(h.control, view, spec(state="Closed"), asked=LEVELS)
    assert "write" in transactions


async def test_a_resume_naming_no_hold_of_an_unheld_session_is_refused(h: Harness) -> None:
    session = await h.session()
    [refused] = await apply(h, session.id, spec(resume={"holdId": "hold_typo"}), asked=EVERY)
    assert (refused.control, refused.reason) == ("spec.resume", "HoldMismatch")
    assert refused.message == (
        "spec.resume.holdId hold_typo is not the Session's hold (it is not held); nothing resumed"
    )


async def test_controls_asked_of_an_ended_session_are_refused_naming_its_state(
    h: Harness,
) -> None:
    session = await h.session()
    await h.control.fail_session(session.id, "actor_init_failed")
    asks = spec(state="Closed", interrupt="now", resume={"holdId": "hold_1"})
    refused = await apply(h, session.id, asks, asked=EVERY)
    failed = "the Session has failed (actor init failed)"
    assert refused == [
        Refusal("spec.state", "SessionFailed", f"spec.state Closed: {failed}; nothing closed"),
        Refusal(
            "spec.interrupt", "SessionFailed", f"spec.interrupt now: {failed}; nothing interrupted"
        ),
        Refusal(
            "spec.resume", "SessionFailed", f"spec.resume.holdId hold_1: {failed}; nothing resumed"
        ),
    ]
    # After a restart the levels apply again: refused when asked, nothing more now.
    assert await apply(h, session.id, asks) == []


async def test_an_interrupt_of_a_session_being_cancelled_is_refused(h: Harness) -> None:
    session = await h.session()
    await h.running(session.id)
    await h.control.cancel(session.id)  # its Turn still stops
    [refused] = await apply(h, session.id, spec(interrupt="later"), asked=EVERY)
    assert refused == Refusal(
        "spec.interrupt",
        "SessionClosing",
        "spec.interrupt later: the Session is being cancelled; nothing interrupted",
    )
