"""Kubernetes Events a person reads (issue 12): CamelCase reasons, Turns by their
resource name, plain words, warnings for failures, holds and losses, and at
most one Event per Turn, none when per-Turn Events are off."""

from __future__ import annotations

from collections import Counter

from helmr.events import Event
from helmr.operator.mirror.event_text import KubeEvent, kube_event
from helmr.states import ErrorInfo
from tests.unit.control.harness import Harness


def named(turn_id: str) -> str:
    return f"name-of-{turn_id[-4:].lower()}"


def told(events: list[Event], *, per_turn: bool = True) -> list[tuple[Event, KubeEvent]]:
    out = []
    for event in events:
        k = kube_event(event, named, per_turn=per_turn)
        if k is not None:
            out.append((event, k))
    return out


async def test_a_turns_outcome_and_a_hold_read_as_sentences(h: Harness) -> None:
    session = await h.session()
    epoch, first = await h.running(session.id)
    await h.control.complete(session.id, epoch, first.id, {"ok": 1})
    await h.control.enqueue(session.id, "second")
    second = await h.control.receive(session.id, epoch, timeout=0)
    assert second is not None
    receipt = await h.control.interrupt(session.id)
    await h.control.process_exited(session.id, epoch, 0)
    await h.control.resume(session.id, receipt.hold_id)
    await h.control.close(session.id)

    events = told(await h.events(session.id))
    reasons = [k.reason for _, k in events]
    assert reasons == [
        "TurnCompleted",
        "SessionHeld",
        "TurnInterrupted",
        "SessionResumed",
        "SessionClosed",
    ]
    by_reason = {k.reason: k for _, k in events}
    assert by_reason["TurnCompleted"].message == f"Turn {named(first.id)} completed"
    assert not by_reason["TurnCompleted"].warning
    held = by_reason["SessionHeld"]
    assert held.warning
    assert held.message == (
        f"Interrupted, Turn {named(second.id)} is stopping;"
        f" resume with spec.resume.holdId: {receipt.hold_id}"
    )
    assert (
        by_reason["TurnInterrupted"].message
        == f"Turn {named(second.id)} was interrupted by an interrupt"
    )
    assert by_reason["SessionClosed"].message == "Session closed after its queued Turns finished"
    for _, k in events:  # no Python reprs
        assert "{" not in k.message, k.message
        assert "'" not in k.message, k.message
    # Bounded: one Event per Turn at most.
    per_turn = Counter(e.turn_id for e, k in events if k.reason.startswith("Turn"))
    assert set(per_turn.values()) == {1}

    quiet = told(await h.events(session.id), per_turn=False)
    assert [k.reason for _, k in quiet] == ["SessionHeld", "SessionResumed", "SessionClosed"]


async def test_a_failed_turn_and_process_failures_are_warnings(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.fail(session.id, epoch, turn.id, ErrorInfo(code="e", message="it broke"))
    for _ in range(3):
        await h.control.process_exited(session.id, epoch, 1)
        await h.control.enqueue(session.id, "again")
        epoch = await h.control.process_started(session.id)
    events = [k for _, k in told(await h.events(session.id))]
    assert events[0] == KubeEvent("TurnFailed", f"Turn {named(turn.id)} failed: it broke", True)
    failures = [k for k in events if k.reason in ("ProcessFailed", "SessionHeld")]
    assert [k.reason for k in failures] == ["ProcessFailed", "ProcessFailed", "SessionHeld"]
    assert all(k.warning for k in failures)
    assert failures[0].message.startswith("Runner process 1 failed: process failed")
    assert "three consecutive failures hold the Session" in failures[2].message


async def test_a_loss_where_saves_are_unavailable_says_nothing_was_saved(h: Harness) -> None:
    session = await h.session()
    epoch = await h.control.process_started(session.id)
    why = "the cluster serves no VolumeSnapshot API (snapshot.storage.k8s.io/v1)"
    await h.control.execution_lost(session.id, epoch, saves_unavailable=why)

    [(_, lost)] = [
        (e, k) for e, k in told(await h.events(session.id)) if k.reason == "ExecutionLost"
    ]
    assert lost.warning
    assert lost.message == (
        f"Runner process {epoch} was lost (its pod was evicted or deleted, or its node was"
        f" lost); nothing was saved, the next runner starts from an empty disk: {why}"
    )
