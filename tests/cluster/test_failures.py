"""Failure semantics with real runner pods: process crashes, execution loss,
failing handlers (spec/000 "After a failure", spec/002 ``session.process_failed``).

The sessions here run the misbehaving echo (``tests/actors/misbehaving.py``):
``{"crash": true}`` exits the process with code 3, ``{"sleep": s}`` blocks
ignoring cancellation, ``{"raise": m}`` fails its Turn.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from helmr.client import Client, Event, Session, SessionRef, TurnRef
from helmr.errors import SessionHeld, SessionNotOpen
from helmr.resources import GROUP, SESSIONS, VERSION

from .sessions import all_events, create_actor, eventually, runner_pods, start_session

QUIET = 5.0
"""Seconds (ten reconcile passes of the test operator) in which nothing may happen."""


@pytest.fixture
def session(misbehaving_session: SessionRef) -> SessionRef:
    return misbehaving_session


def of_kind(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == kind]  # type: ignore[misc]


def session_cr(api_client: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    got = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, SESSIONS, name
    )
    assert isinstance(got, dict)
    return got


async def failures_reach(session: SessionRef, count: int) -> Session | None:
    """The Session once ``count`` failures are counted and no process is live."""
    state = await session.retrieve()
    return state if state.consecutive_failures == count and not state.process_live else None


async def counted(session: SessionRef, count: int) -> Session:
    state: Session = await eventually(
        partial(failures_reach, session, count), what=f"{count} counted process failures"
    )
    return state


async def crash(session: SessionRef) -> tuple[TurnRef, int]:
    """Runs one ``{"crash": true}`` Turn; returns it and the epoch its process had."""
    turn = await session.enqueue({"crash": True})
    outcome = await turn.wait(timeout=120)
    assert (outcome.status, outcome.reason) == ("interrupted", "process_failed")
    assert outcome.epoch is not None
    return turn, outcome.epoch


async def stays_queued(session: SessionRef, turn: TurnRef, core: client.CoreV1Api) -> None:
    """Nothing runs ``turn`` and no runner pod starts for QUIET seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + QUIET
    while loop.time() < end:
        assert (await turn.retrieve()).status == "queued"
        state = await session.retrieve()
        assert not state.process_live
        assert state.active_turn_id is None
        await asyncio.sleep(0.5)


async def test_three_crashes_in_a_row_hold_the_session_until_resumed(
    session: SessionRef,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    epochs = []
    for expected_failures in (1, 2, 3):
        _, epoch = await crash(session)
        epochs.append(epoch)
        state = await counted(session, expected_failures)
        # Each crash is a separate process: the next Turn ran on a new one.
        assert state.consecutive_failures == expected_failures
        assert (state.hold is None) == (expected_failures < 3)

    assert epochs == sorted(set(epochs))
    state = await session.retrieve()
    assert state.status == "open"
    assert state.hold is not None
    assert state.hold.reason == "process_failures"
    hold_id = state.hold.hold_id
    failed = of_kind(await all_events(session), "session.process_failed")
    assert failed == [
        {"processEpoch": epochs[0], "reason": "process_failed", "holdId": None},
        {"processEpoch": epochs[1], "reason": "process_failed", "holdId": None},
        {"processEpoch": epochs[2], "reason": "process_failed", "holdId": hold_id},
    ]
    status = await eventually(
        lambda: (session_cr(api_client, namespace, state.name).get("status") or {}).get("hold"),
        what="the hold in the Session's status",
    )
    assert status == {"holdId": hold_id, "reason": "process_failures"}
    cr = session_cr(api_client, namespace, state.name)["status"]
    assert cr["consecutiveProcessFailures"] == 3

    # Held: send is refused, enqueue still admits, but nothing runs and no process starts.
    with pytest.raises(SessionHeld):
        await session.send("hello?")
    after = await session.enqueue("after the hold")
    assert after.state is not None
    assert after.state.status == "queued"
    await stays_queued(session, after, core)
    assert runner_pods(core, namespace) == []

    resumed = await session.resume(hold_id=hold_id)
    assert resumed.hold is None
    assert resumed.consecutive_failures == 0
    outcome = await after.wait(timeout=120)
    assert outcome.status == "completed"
    assert outcome.result == {"echo": "after the hold"}
    assert outcome.epoch is not None
    assert outcome.epoch > epochs[-1]
    events = await all_events(session)
    assert of_kind(events, "session.resume") == [{"holdId": hold_id, "how": "resume"}]
    # The crashed Turns were never replayed: each ran exactly once.
    running = [e.turn_id for e in events if e.kind == "turn.running"]
    assert len(running) == len(set(running)) == 4


async def test_a_deleted_runner_pod_is_an_execution_loss_not_a_process_failure(
    session: SessionRef,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    await crash(session)
    await counted(session, 1)

    stuck = await session.enqueue({"sleep": 600})
    epoch = await delete_pod_running(stuck, core, namespace)

    lost = await stuck.wait(timeout=120)
    assert (lost.status, lost.reason) == ("interrupted", "computer_execution_lost")
    assert lost.epoch == epoch
    state = await eventually(
        lambda: _ended(session, epoch), what="the lost process to be recorded as ended"
    )
    assert state.consecutive_failures == 1  # unchanged: a loss is not a process failure
    assert state.hold is None
    assert state.status == "open"
    events = await all_events(session)
    [loss] = of_kind(events, "session.execution_lost")
    computer_id = loss["computerId"]  # the lost disk's claim
    assert isinstance(computer_id, str)
    assert loss == {
        "processEpoch": epoch,
        "computerId": computer_id,
        "computerVersion": None,
        "savesUnavailable": None,
    }
    # Recorded as process_failed with reason execution_lost, counted toward the loss limit.
    assert [d for d in of_kind(events, "session.process_failed") if d["processEpoch"] == epoch] == [
        {"processEpoch": epoch, "reason": "execution_lost", "holdId": None}
    ]
    interrupted = next(
        e.data for e in events if e.kind == "turn.interrupted" and e.turn_id == stuck.id
    )
    assert isinstance(interrupted, dict)
    assert interrupted == {
        "reason": "computer_execution_lost",
        "computerId": computer_id,
        "leaseEpoch": epoch,
        "recoveryGap": False,
    }

    # The loss neither counted nor reset the count: two more crashes make three.
    await crash(session)
    state = await counted(session, 2)
    assert state.hold is None
    await crash(session)
    state = await counted(session, 3)
    assert state.hold is not None
    assert state.hold.reason == "process_failures"


async def delete_pod_running(turn: TurnRef, core: client.CoreV1Api, namespace: str) -> int:
    """Deletes the pod once ``turn`` runs in it, as eviction or ``kubectl delete pod``
    do (graceful: SIGTERM, then SIGKILL after the grace period); returns its epoch."""

    async def running_pod() -> client.V1Pod | None:
        if (await turn.retrieve()).status != "running":
            return None
        pods = [p for p in runner_pods(core, namespace) if p.status.phase == "Running"]
        return pods[0] if pods else None

    pod = await eventually(running_pod, what=f"{turn.id} running in its pod")
    core.delete_namespaced_pod(pod.metadata.name, namespace)
    return int(pod.metadata.labels["helmr.dev/process-epoch"])


async def test_repeated_execution_loss_fails_the_session(
    session: SessionRef,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    stuck = [await session.enqueue({"sleep": 600}) for _ in range(3)]
    tail = await session.enqueue("never runs")

    epochs = []
    for turn in stuck:
        epochs.append(await delete_pod_running(turn, core, namespace))
        lost = await turn.wait(timeout=120)
        assert (lost.status, lost.reason) == ("interrupted", "computer_execution_lost")

    async def failed() -> Session | None:
        state = await session.retrieve()
        return state if state.status == "failed" else None

    state = await eventually(failed, what="the session to fail")
    assert state.failure_reason == "execution_lost"
    assert state.consecutive_failures == 0  # losses are not process failures
    assert len(set(epochs)) == 3
    never = await tail.retrieve()
    assert (never.status, never.reason, never.started_at) == ("cancelled", "session_failed", None)
    events = await all_events(session)
    assert [d["processEpoch"] for d in of_kind(events, "session.execution_lost")] == epochs
    assert of_kind(events, "session.process_failed") == [
        {"processEpoch": e, "reason": "execution_lost", "holdId": None} for e in epochs
    ]
    with pytest.raises(SessionNotOpen):
        await session.enqueue("too late")
    await eventually(lambda: not runner_pods(core, namespace), what="no runner pod left")


async def _ended(session: SessionRef, epoch: int) -> Any:
    state = await session.retrieve()
    return state if state.process_epoch >= epoch and not state.process_live else None


async def test_a_throwing_handler_fails_its_turn_and_the_next_turn_runs(
    session: SessionRef,
) -> None:
    boom = await session.enqueue({"raise": "boom"})
    after = await session.enqueue("after the failure")
    failed = await boom.wait(timeout=120)
    following = await after.wait(timeout=120)

    assert failed.status == "failed"
    assert failed.error is not None
    assert (failed.error.code, failed.error.message) == ("actor_error", "boom")
    assert failed.has_result is False
    assert failed.has_response is False
    assert following.status == "completed"
    assert following.result == {"echo": "after the failure"}
    # A failed Turn is not a process failure: the same process ran the next Turn.
    assert following.epoch == failed.epoch
    state = await session.retrieve()
    assert state.status == "open"
    assert state.consecutive_failures == 0
    assert state.hold is None
    events = await all_events(session)
    assert of_kind(events, "session.process_failed") == []
    assert [e.data for e in events if e.kind == "turn.failed" and e.turn_id == boom.id] == [
        {"error": {"code": "actor_error", "message": "boom"}}
    ]


async def test_an_actor_that_cannot_initialize_fails_the_session(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    # The module exists, the attribute does not: the runner exits 78 (INIT_FAILED).
    create_actor(api_client, namespace, runner_image, entrypoint="echo.echo:no_such_actor")
    session = await start_session(helmr, namespace)
    turns = [await session.enqueue(f"never runs {i}") for i in range(2)]

    async def failed() -> Session | None:
        state = await session.retrieve()
        return state if state.status == "failed" else None

    state = await eventually(failed, what="the session to fail")
    assert state.failure_reason == "actor_init_failed"
    assert state.hold is None
    # A known initialization failure is not retried: one process, one counted failure.
    assert state.process_epoch == 1
    for turn in turns:
        never = await turn.retrieve()
        assert (never.status, never.reason, never.started_at) == (
            "cancelled",
            "session_failed",
            None,
        )
    events = await all_events(session)
    assert of_kind(events, "session.process_failed") == [
        {"processEpoch": 1, "reason": "process_failed", "holdId": None}
    ]
    assert of_kind(events, "turn.running") == []
    await eventually(lambda: not runner_pods(core, namespace), what="no runner pod left")
