"""Preparation failures and the Actor's limits against a real operator (issue 9, items 3-4).

Each test names the spec/001 sentence or the Actor field description it checks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from kubernetes import client

from helmr.client import Client, SessionRef
from helmr.errors import QueueFull
from helmr.protocol.api import LimitsView, SessionView
from helmr.resources import GROUP, SESSIONS, VERSION

from .sessions import all_events, create_actor, event_data, eventually, start_session

MISSING_IMAGE = "helmr.local/does-not-exist:dev"
DECLARED = "declared:declared"
"""``tests/actors/declared.py``: settings in its code, and a self-cancel on request."""


async def test_an_image_that_cannot_be_pulled_exhausts_preparation_and_fails_the_session(
    helmr: Client, api_client: client.ApiClient, namespace: str
) -> None:
    """spec/001: "Repeated infrastructure loss or preparation exhaustion terminates
    the Session". ErrImageNeverPull, retried per ``retry`` (2 attempts), fails it."""
    actor = create_actor(
        api_client,
        namespace,
        MISSING_IMAGE,
        "unpullable",
        retry={"maxAttempts": 2, "backoffSeconds": 1},
    )
    session = await start_session(helmr, namespace, actor)
    turn = await session.enqueue("never runs")

    failed = await eventually(
        lambda: _ended(session), timeout=120, what="the session to fail its preparation"
    )

    assert failed.status == "failed"
    assert failed.failure_reason.startswith(
        f"preparation_exhausted: ErrImageNeverPull: image {MISSING_IMAGE}"
    )
    attempts = [
        d
        for d in event_data(await all_events(session), "session.process_failed")
        if d["reason"] == "preparation_failed"
    ]
    assert [(d["attempt"], d["maxAttempts"]) for d in attempts] == [(1, 2), (2, 2)]
    assert all(MISSING_IMAGE in d["detail"] for d in attempts)
    assert (await turn.retrieve()).status == "cancelled"


async def test_admission_beyond_queue_limit_is_refused_and_the_limits_show_on_the_session(
    helmr: Client, api_client: client.ApiClient, namespace: str
) -> None:
    """queueLimit: "admission beyond it is refused (HTTP 429 `queue_full`)"; the limits
    are resolved once when the Session opens and shown on its status."""
    # The image never runs and the backoff is long, so the one Turn stays queued.
    actor = create_actor(
        api_client,
        namespace,
        MISSING_IMAGE,
        "queued",
        queueLimit=1,
        retry={"maxAttempts": 10, "backoffSeconds": 300},
    )
    session = await start_session(helmr, namespace, actor)
    resolved = await eventually(
        lambda: _limits(session), timeout=30, what="the limits to be resolved"
    )
    assert resolved.queue_limit == 1
    await session.enqueue("first")

    with pytest.raises(QueueFull) as refused:
        await session.enqueue("second")

    assert refused.value.details["queueLimit"] == 1
    state = await session.retrieve()
    custom = client.CustomObjectsApi(api_client)

    def mirrored() -> Any:
        cr = cast(
            dict[str, Any],
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, SESSIONS, state.name),
        )
        return (cr.get("status") or {}).get("limits")

    limits = await eventually(mirrored, timeout=30, what="status.limits on the Session")
    assert limits["queueLimit"] == 1
    assert limits["retry"] == {"maxAttempts": 10, "backoffSeconds": 300}


async def test_a_run_past_max_duration_ends_and_the_next_turn_starts_a_new_run(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    """maxDurationSeconds: a Run longer than it ends once its Turn settles (a stop,
    not a failure) and the next Turn starts a new Run."""
    actor = create_actor(api_client, namespace, runner_image, "short-runs", maxDurationSeconds=3)
    session = await start_session(helmr, namespace, actor)
    first = await (await session.enqueue("one")).wait(timeout=60)
    stopped = await eventually(
        lambda: _stops(session, first.epoch), timeout=30, what="the run to end at its maxDuration"
    )
    second = await (await session.enqueue("two")).wait(timeout=60)

    assert (first.status, second.status) == ("completed", "completed")
    assert stopped[0]["reason"] == "run_duration_elapsed"
    assert second.epoch is not None
    assert first.epoch is not None
    assert second.epoch > first.epoch
    assert event_data(await all_events(session), "session.process_failed") == []


async def test_an_open_session_idle_past_ttl_closes_how_idle(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    """ttlSeconds: an open Session idle past it closes (`session.closed` how `idle`),
    releasing its Workspace."""
    actor = create_actor(api_client, namespace, runner_image, "expiring", ttlSeconds=3)
    session = await start_session(helmr, namespace, actor)
    assert (await (await session.enqueue("one")).wait(timeout=60)).status == "completed"

    closed = await eventually(lambda: _ended(session), timeout=60, what="the idle expiry")

    assert (closed.status, closed.closed_how) == ("closed", "idle")
    # Its Workspace is released: a new Session opens on it.
    assert (await start_session(helmr, namespace, actor)).id != session.id


async def test_the_actor_s_code_settings_apply_where_the_manifest_is_silent(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    """spec/001: ``actor({ id, run, idleTimeout?, queue?, maxDuration?, ttl?, retry? })``
    defines execution: ``tests/actors/declared.py`` declares queue 2, max_duration 4
    and ttl 5; its manifest sets only ttlSeconds, which wins. The first receive
    reports them, the limits show them, and the Run ends at the code's max_duration
    (a Run duration, not a turn deadline)."""
    actor = create_actor(
        api_client, namespace, runner_image, "declared", entrypoint=DECLARED, ttlSeconds=3600
    )
    session = await start_session(helmr, namespace, actor)
    first = await (await session.enqueue("one")).wait(timeout=60)
    assert first.status == "completed"
    assert first.deadline_at is None  # max_duration is not a per-turn deadline

    limits = await session.retrieve()
    assert limits.limits is not None
    assert (limits.limits.queue_limit, limits.limits.max_run_duration, limits.limits.idle_ttl) == (
        2,
        timedelta(seconds=4),
        timedelta(seconds=3600),  # the manifest's, not the code's 5
    )
    assert (limits.limits.max_turn_duration, limits.limits.retry_max_attempts) == (None, 3)
    stopped = await eventually(
        lambda: _stops(session, first.epoch), timeout=30, what="the run to end at max_duration"
    )
    assert stopped[0]["reason"] == "run_duration_elapsed"
    running = event_data(await all_events(session), "turn.running")
    assert running[0]["tags"] == ["declared"]
    custom = client.CustomObjectsApi(api_client)
    name = limits.name

    def mirrored() -> Any:
        cr = cast(
            dict[str, Any],
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, SESSIONS, name),
        )
        shown = (cr.get("status") or {}).get("limits") or {}
        return shown if shown.get("queueLimit") == 2 else None

    shown = await eventually(mirrored, timeout=30, what="the code's queue on status.limits")
    assert (shown["maxDurationSeconds"], shown["ttlSeconds"]) == (4, 3600)


async def test_an_actor_cancels_its_own_session(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    """spec/001: "Cancellation also works through a runtime Session reference inside an
    Actor": the running turn ends interrupted (cancel), the queued one cancelled, and
    the Session closes how cancel once its runner is gone."""
    actor = create_actor(api_client, namespace, runner_image, "canceller", entrypoint=DECLARED)
    session = await start_session(helmr, namespace, actor)
    running = await session.enqueue({"cancel_session": True})
    queued = await session.enqueue("never runs")

    closed = await eventually(lambda: _ended(session), timeout=60, what="the self-cancel")

    assert (closed.status, closed.closed_how) == ("closed", "cancel")
    assert closed.cancel_requested_at is not None
    stopped = await running.retrieve()
    assert (stopped.status, stopped.reason) == ("interrupted", "cancel")
    assert (await queued.retrieve()).status == "cancelled"
    assert event_data(await all_events(session), "session.process_failed") == []


async def _ended(session: SessionRef) -> SessionView | None:
    state = await session.retrieve()
    return state if state.status in ("closed", "failed") else None


async def _limits(session: SessionRef) -> LimitsView | None:
    return (await session.retrieve()).limits


async def _stops(session: SessionRef, epoch: int | None) -> list[dict[str, Any]]:
    stopped = event_data(await all_events(session), "session.process_stopped")
    return [
        d for d in stopped if (d["reason"], d["processEpoch"]) == ("run_duration_elapsed", epoch)
    ]
