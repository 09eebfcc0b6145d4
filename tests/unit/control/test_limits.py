"""A Session's limits (issue 9, item 4): resolved once, shown on the Session, enforced.

spec/001: ``actor({ id, run, idleTimeout?, queue?, maxDuration?, ttl?, retry? })``
defines execution; these tests check that each limit the Actor documents
does what its description says.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from helmr.control import SessionLimits
from helmr.errors import QueueFull, SessionNotOpen
from tests.unit.api import NAMESPACE, Api
from tests.unit.control.harness import DEFAULT_LIMITS as DEFAULTS
from tests.unit.control.harness import Harness


def limits(**changes: object) -> SessionLimits:
    return dataclasses.replace(DEFAULTS, **changes)  # type: ignore[arg-type]


async def test_limits_are_resolved_once_and_shown_on_the_session(h: Harness) -> None:
    session = await h.session()
    assert session.limits is None  # until the operator has read the Actor

    first = await h.control.resolve_limits(
        session.id, limits(queue_limit=7, max_turn_duration=timedelta(seconds=30))
    )
    # An Actor changed later does not change an open Session's limits.
    again = await h.control.resolve_limits(session.id, limits(queue_limit=1))

    assert first.limits is not None
    assert (first.limits.queue_limit, first.limits.max_turn_duration) == (7, timedelta(seconds=30))
    assert again.limits == first.limits
    assert (await h.control.get_session(session.id)).max_turn_duration == timedelta(seconds=30)
    assert [s.id for s in await h.control.sessions_without_limits()] == []


async def test_admission_beyond_the_queue_limit_is_refused_naming_it(h: Harness) -> None:
    """queueLimit: "Most Turns a Session may hold queued; admission beyond it is refused"."""
    session = await h.session()
    await h.control.resolve_limits(session.id, limits(queue_limit=2))
    await h.control.enqueue(session.id, 1)
    await h.control.enqueue(session.id, 2)

    with pytest.raises(QueueFull) as refused:
        await h.control.enqueue(session.id, 3)
    with pytest.raises(QueueFull):
        await h.control.send(session.id, "an idle send enqueues, so it is refused too")
    assert (refused.value.status, refused.value.code) == (429, "queue_full")
    assert refused.value.details == {"session_id": session.id, "queueLimit": 2, "queued": 2}

    # A started Turn makes room.
    epoch = await h.control.process_started(session.id)
    assert await h.control.receive(session.id, epoch, timeout=0) is not None
    assert (await h.control.enqueue(session.id, 3)).sequence == 3


async def test_the_api_answers_429_queue_full_and_the_cli_gives_a_hint(api: Api) -> None:
    started = await api.call(
        "POST", f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions", json={"workspace": "ws"}
    )
    sid = started["session"]["id"]
    await api.control.resolve_limits(sid, limits(queue_limit=1))
    await api.call("POST", f"/v1/sessions/{sid}/turns", json={"input": 1})

    refused = await api.call("POST", f"/v1/sessions/{sid}/turns", json={"input": 2}, status=429)

    assert refused["error"]["code"] == "queue_full"
    assert refused["error"]["details"]["queueLimit"] == 1
    assert "queueLimit" in refused["error"]["message"]


async def test_a_run_past_max_duration_ends_after_its_turn_settles_as_a_stop(h: Harness) -> None:
    """maxDurationSeconds: a Run longer than it is stopped after its current Turn
    settles, and the next Turn starts a new Run; a stop, not a failure."""
    session = await h.session()
    await h.control.resolve_limits(session.id, limits(max_run_duration=timedelta(seconds=60)))
    epoch = await h.control.process_started(session.id)
    h.clock.advance(timedelta(seconds=30))  # preparing does not use up the Run
    await h.control.process_prepared(session.id, epoch)
    await h.control.enqueue(session.id, "first")
    turn = await h.control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    await h.control.enqueue(session.id, "next")
    h.clock.advance(timedelta(seconds=60))
    # The running Turn is not cut short.
    await h.control.complete(session.id, epoch, turn.id, "done")

    assert await h.control.receive(session.id, epoch, timeout=0) is None  # no more Turns
    stops = await h.control.processes_to_stop()
    assert [(s.epoch, s.reason) for s in stops] == [(epoch, "run_duration_elapsed")]
    ended = await h.control.process_exited(session.id, epoch, 0)

    assert ended.outcome == "stopped"
    stopped = (await h.events(session.id))[-1]
    assert (stopped.kind.value, stopped.data) == (
        "session.process_stopped",
        {"processEpoch": epoch, "reason": "run_duration_elapsed"},
    )
    assert (await h.control.get_session(session.id)).consecutive_failures == 0
    assert [s.id for s in await h.control.sessions_needing_runner(h.clock())] == [session.id]
    # The new Run has a deadline of its own.
    new_epoch = await h.control.process_started(session.id)
    assert (await h.control.receive(session.id, new_epoch, timeout=0)) is not None


async def test_an_idle_run_past_max_duration_is_stopped_by_the_deadline_pass(h: Harness) -> None:
    session = await h.session()
    await h.control.resolve_limits(session.id, limits(max_run_duration=timedelta(seconds=60)))
    epoch = await h.control.process_started(session.id)
    await h.control.process_prepared(session.id, epoch)
    assert await h.control.next_deadline() == h.clock() + timedelta(seconds=60)

    now = h.clock.advance(timedelta(seconds=60))
    stops = await h.control.expire_deadlines(now)

    assert [(s.epoch, s.reason) for s in stops] == [(epoch, "run_duration_elapsed")]
    assert (await h.control.process_exited(session.id, epoch, 0)).outcome == "stopped"


async def test_an_open_session_idle_past_ttl_closes_how_idle(h: Harness) -> None:
    """ttlSeconds: an open Session idle past it closes (``session.closed`` how
    ``idle``), releasing its Workspace."""
    session = await h.session()
    await h.control.resolve_limits(session.id, limits(idle_ttl=timedelta(seconds=60)))
    epoch, turn = await h.running(session.id)
    h.clock.advance(timedelta(seconds=50))
    await h.control.complete(session.id, epoch, turn.id, "done")
    # Idle counts from the last Turn's end, not from the open.
    now = h.clock.advance(timedelta(seconds=30))
    assert await h.control.expire_idle(now) == []
    assert await h.control.next_idle_expiry() == now + timedelta(seconds=30)

    now = h.clock.advance(timedelta(seconds=30))
    assert await h.control.expire_idle(now) == [session.id]

    # Its warm runner is asked to stop; the Session is closed once it is gone.
    closing = await h.control.get_session(session.id)
    assert closing.status == "closing"
    with pytest.raises(SessionNotOpen):
        await h.control.enqueue(session.id, "too late")
    assert [s.reason for s in await h.control.processes_to_stop()] == ["idle"]
    await h.control.process_exited(session.id, epoch, 0)
    closed = await h.control.get_session(session.id)
    assert (closed.status, closed.closed_how) == ("closed", "idle")
    assert (await h.events(session.id))[-1].data == {"how": "idle"}
    # Its Workspace is free: another Session may open on it.
    reopened = await h.control.open_session(
        namespace="team", name="again", actor="reviewer", workspace=session.workspace
    )
    assert reopened.status == "open"


async def test_work_or_a_hold_keeps_a_session_from_idle_expiry(h: Harness) -> None:
    queued = await h.session()
    held = await h.session()
    for session in (queued, held):
        await h.control.resolve_limits(session.id, limits(idle_ttl=timedelta(seconds=1)))
    await h.control.enqueue(queued.id, "waits for a runner")
    await h.control.interrupt(held.id)

    assert await h.control.expire_idle(h.clock.advance(timedelta(hours=1))) == []
