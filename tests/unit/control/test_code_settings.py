"""The actor's own settings take effect where the Actor manifest is silent (spec/001:
``actor({ id, run, idleTimeout?, queue?, maxDuration?, ttl?, retry? })``; issue 27
item 5): a process's first receive reports what ``actor(...)`` declared, and each
limit the Session's resolution left unset is taken from it, once."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from helmr.control import SessionLimits
from helmr.errors import QueueFull, StaleEpoch
from helmr.protocol import ActorSettings
from tests.unit.control.harness import DEFAULT_LIMITS, Harness

SILENT = dataclasses.replace(DEFAULT_LIMITS, queue_limit=None, retry_max_attempts=None)
"""The limits of a Session whose Actor sets none (nor does the Session)."""
CODE = ActorSettings(queue=2, max_duration=600, ttl=60, retry=5, idle_timeout=30)


async def _resolved(h: Harness, limits: SessionLimits = SILENT) -> str:
    session = await h.session()
    await h.control.resolve_limits(session.id, limits)
    return session.id


async def test_a_silent_manifest_shows_the_defaults_until_the_code_reports(h: Harness) -> None:
    session_id = await _resolved(h)
    before = (await h.control.get_session(session_id)).limits
    assert before is not None
    assert (before.queue_limit, before.retry_max_attempts) == (100, 3)
    assert (before.max_run_duration, before.idle_ttl, before.idle_timeout_seconds) == (
        None,
        None,
        None,
    )

    epoch = await h.control.process_started(session_id)
    await h.control.take_code_settings(session_id, epoch, CODE)

    after = (await h.control.get_session(session_id)).limits
    assert after is not None
    assert (after.queue_limit, after.retry_max_attempts, after.idle_timeout_seconds) == (2, 5, 30)
    assert (after.max_run_duration, after.idle_ttl) == (
        timedelta(seconds=600),
        timedelta(seconds=60),
    )


async def test_the_manifest_wins_where_both_say_something(h: Harness) -> None:
    manifest = dataclasses.replace(
        SILENT,
        queue_limit=7,
        max_run_duration=timedelta(seconds=90),
        idle_timeout_seconds=9,
    )
    session_id = await _resolved(h, manifest)
    epoch = await h.control.process_started(session_id)
    await h.control.take_code_settings(session_id, epoch, CODE)

    limits = (await h.control.get_session(session_id)).limits
    assert limits is not None
    # The manifest's three stay; the code fills the two it left unset.
    assert (limits.queue_limit, limits.max_run_duration, limits.idle_timeout_seconds) == (
        7,
        timedelta(seconds=90),
        9,
    )
    assert (limits.idle_ttl, limits.retry_max_attempts) == (timedelta(seconds=60), 5)


async def test_a_setting_taken_from_the_code_is_kept_by_later_runs(h: Harness) -> None:
    session_id = await _resolved(h)
    first = await h.control.process_started(session_id)
    await h.control.take_code_settings(session_id, first, ActorSettings(queue=2))
    await h.control.process_exited(session_id, first, 0)
    second = await h.control.process_started(session_id)
    # A later Run's code (say, a new image) changes nothing taken, fills what is not.
    await h.control.take_code_settings(session_id, second, ActorSettings(queue=50, ttl=60))

    limits = (await h.control.get_session(session_id)).limits
    assert limits is not None
    assert (limits.queue_limit, limits.idle_ttl) == (2, timedelta(seconds=60))


async def test_the_code_s_queue_limits_admission(h: Harness) -> None:
    session_id = await _resolved(h)
    epoch = await h.control.process_started(session_id)
    await h.control.take_code_settings(session_id, epoch, ActorSettings(queue=1))
    await h.control.enqueue(session_id, 1)

    with pytest.raises(QueueFull) as refused:
        await h.control.enqueue(session_id, 2)
    assert refused.value.details["queueLimit"] == 1


async def test_the_code_s_max_duration_ends_the_run_it_reported_from(h: Harness) -> None:
    """``max_duration`` is ``maxDurationSeconds``, the longest Run, not a turn deadline:
    a Run that reports it once it runs has it counted from the report."""
    session_id = await _resolved(h)
    epoch = await h.control.process_started(session_id)
    await h.control.process_prepared(session_id, epoch)
    await h.control.take_code_settings(session_id, epoch, ActorSettings(max_duration=60))
    assert await h.control.next_deadline() == h.clock() + timedelta(seconds=60)

    stops = await h.control.expire_deadlines(h.clock.advance(timedelta(seconds=60)))
    assert [(s.epoch, s.reason) for s in stops] == [(epoch, "run_duration_elapsed")]
    await h.control.process_exited(session_id, epoch, 0)
    # The next Run gets it from its preparation's end, as a manifest's.
    await h.control.enqueue(session_id, "work")
    later = await h.control.process_started(session_id)
    await h.control.process_prepared(session_id, later)
    assert await h.control.next_deadline() == h.clock() + timedelta(seconds=60)
    turn = await h.control.receive(session_id, later, timeout=0)
    assert turn is not None
    assert turn.deadline_at is None  # not a per-turn deadline


async def test_the_code_s_retry_counts_the_later_preparations(h: Harness) -> None:
    session_id = await _resolved(h)
    epoch = await h.control.process_started(session_id)
    await h.control.take_code_settings(session_id, epoch, ActorSettings(retry=1))
    await h.control.process_exited(session_id, epoch, 0)
    await h.control.enqueue(session_id, "work")

    failing = await h.control.process_started(session_id)
    await h.control.preparation_failed(session_id, failing, "ErrImagePull")

    state = await h.control.get_session(session_id)
    assert (state.status, state.failure_reason) == ("failed", "preparation_exhausted: ErrImagePull")


async def test_a_fenced_process_reports_nothing(h: Harness) -> None:
    session_id = await _resolved(h)
    epoch = await h.control.process_started(session_id)
    with pytest.raises(StaleEpoch):
        await h.control.take_code_settings(session_id, epoch - 1, CODE)
    limits = (await h.control.get_session(session_id)).limits
    assert limits is not None
    assert limits.queue_limit == 100
