"""Preparation failures end, never hang (issue 9, item 3).

spec/001: "Repeated infrastructure loss or preparation exhaustion terminates
the Session". Each failed preparation is a ``session.process_failed`` saying
what failed; the Actor's ``retry.maxAttempts`` of them in a row fail the
Session; a prepared process starts the count again.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from helmr.control import SessionLimits
from tests.unit.control.harness import DEFAULT_LIMITS as DEFAULTS
from tests.unit.control.harness import Harness

RETRY_TWICE = dataclasses.replace(DEFAULTS, retry_max_attempts=2)
PULL = "ErrImageNeverPull: image ghcr.io/x/missing:1: image is not present with pull policy Never"


async def limited(h: Harness, limits: SessionLimits = RETRY_TWICE) -> str:
    session = await h.session()
    await h.control.resolve_limits(session.id, limits)
    await h.control.enqueue(session.id, "work")
    return session.id


async def test_preparation_exhaustion_terminates_the_session(h: Harness) -> None:
    session_id = await limited(h)
    first = await h.control.process_started(session_id)

    failed = await h.control.preparation_failed(session_id, first, PULL)

    assert failed.outcome == "failed"
    state = await h.control.get_session(session_id)
    assert (state.status, state.process_live, state.consecutive_failures) == ("open", False, 0)
    # Backing off: no new process before the backoff has passed.
    assert await h.control.sessions_needing_runner(h.clock()) == []
    later = h.clock.advance(timedelta(seconds=5))
    assert [s.id for s in await h.control.sessions_needing_runner(later)] == [session_id]
    second = await h.control.process_started(session_id)
    await h.control.preparation_failed(session_id, second, PULL)

    ended = await h.control.get_session(session_id)
    assert (ended.status, ended.failure_reason) == ("failed", f"preparation_exhausted: {PULL}")
    failures = [e.data for e in await h.events(session_id) if e.kind.value.endswith("failed")]
    assert failures[:2] == [
        {
            "processEpoch": epoch,
            "reason": "preparation_failed",
            "detail": PULL,
            "attempt": attempt,
            "maxAttempts": 2,
            "holdId": None,
        }
        for attempt, epoch in ((1, first), (2, second))
    ]
    # Its queued work is cancelled, not left queued forever.
    assert "turn.cancelled" in await h.kinds(session_id)


async def test_the_backoff_doubles_with_each_failed_preparation(h: Harness) -> None:
    session_id = await limited(h, dataclasses.replace(DEFAULTS, retry_max_attempts=5))
    for wait in (5, 10, 20):
        epoch = await h.control.process_started(session_id)
        await h.control.preparation_failed(session_id, epoch, "Unschedulable: 0/1 nodes")
        almost = h.clock.advance(timedelta(seconds=wait - 1))
        assert await h.control.sessions_needing_runner(almost) == []
        ready = h.clock.advance(timedelta(seconds=1))
        assert len(await h.control.sessions_needing_runner(ready)) == 1


async def test_a_prepared_process_starts_the_count_again_and_is_no_longer_preparing(
    h: Harness,
) -> None:
    session_id = await limited(h)
    epoch = await h.control.process_started(session_id)
    await h.control.preparation_failed(session_id, epoch, PULL)
    h.clock.advance(timedelta(seconds=5))
    epoch = await h.control.process_started(session_id)

    await h.control.process_prepared(session_id, epoch)

    # Running now: a report of failed preparation is ignored, its end is a process's end.
    assert (await h.control.preparation_failed(session_id, epoch, PULL)).outcome == "ignored"
    assert await h.control.overdue_preparations(h.clock.advance(timedelta(hours=1))) == []
    await h.control.process_exited(session_id, epoch, 1)
    h.clock.advance(timedelta(seconds=5))
    epoch = await h.control.process_started(session_id)
    await h.control.preparation_failed(session_id, epoch, PULL)
    assert (await h.control.get_session(session_id)).status == "open"  # the count restarted


async def test_a_process_still_preparing_at_its_deadline_is_overdue(h: Harness) -> None:
    session_id = await limited(h)
    epoch = await h.control.process_started(session_id)

    assert await h.control.overdue_preparations(h.clock.advance(timedelta(minutes=4))) == []
    overdue = await h.control.overdue_preparations(h.clock.advance(timedelta(minutes=1)))

    assert [(s.id, s.process_epoch) for s in overdue] == [(session_id, epoch)]


async def test_a_process_that_took_a_turn_runs_whatever_its_pod_events_say(h: Harness) -> None:
    session_id = await limited(h)
    epoch = await h.control.process_started(session_id)
    assert await h.control.receive(session_id, epoch, timeout=0) is not None

    assert (await h.control.preparation_failed(session_id, epoch, PULL)).outcome == "ignored"


async def test_a_stop_asked_for_a_preparing_process_is_a_stop_not_a_failed_preparation(
    h: Harness,
) -> None:
    session_id = await limited(h)
    epoch = await h.control.process_started(session_id)
    await h.control.cancel(session_id)

    assert (await h.control.preparation_failed(session_id, epoch, PULL)).outcome == "ignored"
    assert await h.control.overdue_preparations(h.clock.advance(timedelta(hours=1))) == []
