"""Session and Turn controls with real runner pods: interrupt and resume, cancel,
close, messages to the active Turn, and idle suspension (spec/001, spec/002).

A long echo input is a handler that is slow but cooperative: echo streams it
word by word (``FRAGMENT_PAUSE`` apart) and stops once its Turn is no longer
active. The readings of the spec these tests pin down are in docs/semantics.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from helmr.client import Client, Event, Message, SessionRef, TurnRef
from helmr.errors import HoldMismatch, SessionHeld, SessionNotOpen, TurnNotActive, TurnSettling

from .sessions import all_events, create_actor, eventually, runner_pods, start_session

QUIET = 5.0
"""Seconds (ten reconcile passes of the test operator) in which nothing may happen."""


def words(count: int) -> str:
    """An echo input streamed for about ``count`` * 0.05 s."""
    return " ".join(f"w{i}" for i in range(count))


def of_kind(events: list[Event], kind: str, turn: TurnRef | None = None) -> list[Event]:
    return [e for e in events if e.kind == kind and (turn is None or e.turn_id == turn.id)]


def data(event: Event) -> dict[str, Any]:
    assert isinstance(event.data, dict)
    return event.data


async def streaming(session: SessionRef, turn: TurnRef) -> None:
    """Returns once ``turn`` runs and its handler has written output (so it is registered)."""

    async def wrote() -> bool:
        events = await all_events(session)
        return bool(of_kind(events, "turn.output", turn))

    await eventually(wrote, what=f"output of {turn.id}")
    assert (await turn.retrieve()).status == "running"


async def still_queued(session: SessionRef, *queued: TurnRef) -> None:
    """None of ``queued`` starts for QUIET seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + QUIET
    while loop.time() < end:
        for turn in queued:
            assert (await turn.retrieve()).status == "queued"
        assert (await session.retrieve()).active_turn_id is None
        await asyncio.sleep(0.5)


def message_outputs(events: list[Event], turn: TurnRef) -> list[Any]:
    """What echo wrote for the messages it handled, in timeline order."""
    found = []
    for event in of_kind(events, "turn.output", turn):
        assert isinstance(event.data, list)
        for fragment in event.data:
            assert isinstance(fragment, dict)
            value = fragment.get("json")
            if isinstance(value, dict) and "message" in value:
                found.append(value["message"])
    return found


# Interrupt and resume ---------------------------------------------------------------------


async def test_session_interrupt_holds_queued_work_until_resumed_and_never_replays(
    session: SessionRef,
) -> None:
    long = await session.enqueue(words(600))  # ~30 s unless interrupted
    first = await session.enqueue("first after resume")
    await streaming(session, long)

    receipt = await session.interrupt()

    assert (receipt.scope, receipt.turn_id) == ("session", long.id)
    interrupted = await long.wait(timeout=60)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "interrupt")
    state = await session.retrieve()
    assert state.status == "open"
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.reason) == (receipt.hold_id, "interrupt")
    # Held: send is refused, enqueue still admits, queued work stays queued.
    with pytest.raises(SessionHeld):
        await session.send("hello?")
    second = await session.enqueue("second after resume")
    assert second.state is not None
    assert second.state.status == "queued"
    await still_queued(session, first, second)
    with pytest.raises(HoldMismatch) as mismatch:
        await session.resume(hold_id="hold_not_this_one")
    assert (mismatch.value.status, mismatch.value.code) == (409, "hold_mismatch")
    assert (await session.retrieve()).hold is not None

    resumed = await session.resume(hold_id=receipt.hold_id)

    assert resumed.hold is None
    assert (await first.wait(timeout=60)).status == "completed"
    assert (await second.wait(timeout=60)).status == "completed"
    after = await long.retrieve()
    assert (after.status, after.reason) == ("interrupted", "interrupt")
    events = await all_events(session)
    assert [e.turn_id for e in of_kind(events, "turn.running")] == [long.id, first.id, second.id]
    assert [data(e) for e in of_kind(events, "session.interrupt")] == [
        {"holdId": receipt.hold_id, "turnId": long.id, "scope": "session"}
    ]
    assert [data(e) for e in of_kind(events, "session.resume")] == [
        {"holdId": receipt.hold_id, "how": "resume"}
    ]
    # Nothing of the interrupted Turn was recorded after its interruption.
    ended = of_kind(events, "turn.interrupted", long)[0].sequence
    assert max(e.sequence for e in events if e.turn_id == long.id) == ended


async def test_turn_interrupt_stops_only_that_turn_and_holds_until_resumed(
    session: SessionRef,
) -> None:
    """001: "`turn.interrupt()` returns a stop receipt and hold identity"; "Explicit
    interruption requires resume; infrastructure recovery is automatic"."""
    long = await session.enqueue(words(600))
    following = await session.enqueue("next")
    await streaming(session, long)

    receipt = await long.interrupt()

    assert (receipt.scope, receipt.turn_id) == ("turn", long.id)
    outcome = await long.wait(timeout=60)
    assert (outcome.status, outcome.reason) == ("interrupted", "interrupt")
    state = await session.retrieve()
    assert state.hold is not None
    assert (state.hold.hold_id, state.hold.converged) == (receipt.hold_id, True)
    with pytest.raises(SessionHeld):
        await session.send("hello?")
    await still_queued(session, following)
    with pytest.raises(TurnNotActive):
        await long.interrupt()

    await session.resume(hold_id=receipt.hold_id)

    done = await following.wait(timeout=60)
    assert done.status == "completed"
    # The cooperative handler stopped, so the same process took the next Turn.
    assert done.epoch == outcome.epoch
    events = await all_events(session)
    assert [data(e) for e in of_kind(events, "session.resume")] == [
        {"holdId": receipt.hold_id, "how": "resume"}
    ]
    # Nothing of the interrupted Turn was recorded after its outcome.
    ended = of_kind(events, "turn.interrupted", long)[0].sequence
    assert max(e.sequence for e in events if e.turn_id == long.id) == ended


# Cancel and close -------------------------------------------------------------------------


async def test_cancel_cancels_queued_interrupts_active_and_closes(
    session: SessionRef,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    done = await session.enqueue("done before the cancel")
    assert (await done.wait(timeout=60)).status == "completed"
    long = await session.enqueue(words(600))
    queued = [await session.enqueue(f"queued {i}") for i in range(3)]
    await streaming(session, long)

    accepted = await session.cancel()

    assert accepted.cancel_requested_at is not None
    assert accepted.status in ("closing", "closed")
    for turn in queued:
        cancelled = await turn.retrieve()
        assert cancelled.status == "cancelled"
        assert cancelled.started_at is None
    interrupted = await long.wait(timeout=60)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "cancel")

    async def closed() -> Any:
        state = await session.retrieve()
        return state if state.status == "closed" else None

    state = await eventually(closed, what="the session to close")
    assert state.closed_how == "cancel"
    assert state.cancel_requested_at == accepted.cancel_requested_at
    assert not state.process_live
    # Closed only once the old execution is physically excluded: no runner container runs.
    assert all(p.status.phase in ("Succeeded", "Failed") for p in runner_pods(core, namespace))
    # Completed work is unchanged; new input is refused.
    assert (await done.retrieve()).status == "completed"
    with pytest.raises(SessionNotOpen):
        await session.enqueue("too late")
    with pytest.raises(SessionNotOpen):
        await session.send("too late")
    with pytest.raises(SessionNotOpen):
        await session.resume(hold_id="hold_anything")
    events = await all_events(session)
    assert [data(e) for e in of_kind(events, "session.closed")] == [{"how": "cancel"}]
    assert of_kind(events, "session.close") == []  # cancel records only session.closed
    assert [e.turn_id for e in of_kind(events, "turn.cancelled")] == [t.id for t in queued]


async def test_close_drains_the_queue_then_closes(
    session: SessionRef,
) -> None:
    turns = [await session.enqueue(words(10) + f" #{i}") for i in range(5)]

    accepted = await session.close()

    assert accepted.status == "closing"
    assert accepted.cancel_requested_at is None
    with pytest.raises(SessionNotOpen):
        await session.enqueue("too late")
    outcomes = [await turn.wait(timeout=120) for turn in turns]
    assert [o.status for o in outcomes] == ["completed"] * 5
    assert [o.result for o in outcomes] == [{"echo": words(10) + f" #{i}"} for i in range(5)]

    async def closed() -> Any:
        state = await session.retrieve()
        return state if state.status == "closed" else None

    state = await eventually(closed, what="the session to close")
    assert state.closed_how == "close"
    assert state.cancel_requested_at is None
    assert not state.process_live
    with pytest.raises(SessionNotOpen):
        await session.enqueue("still too late")
    events = await all_events(session)
    kinds = [str(e.kind) for e in events]
    assert kinds.count("session.close") == 1
    assert [data(e) for e in of_kind(events, "session.closed")] == [{"how": "close"}]
    last_completed = max(e.sequence for e in of_kind(events, "turn.completed"))
    assert of_kind(events, "session.closed")[0].sequence > last_completed
    assert kinds.index("session.close") < kinds.index("session.closed")


async def test_closing_an_idle_session_records_only_session_closed(
    session: SessionRef,
) -> None:
    done = await (await session.enqueue("only")).wait(timeout=120)
    assert done.status == "completed"
    assert (await session.retrieve()).process_live  # warm, waiting for work

    await session.close()

    async def closed() -> Any:
        state = await session.retrieve()
        return state if state.status == "closed" else None

    state = await eventually(closed, what="the idle session to close")
    assert state.closed_how == "close"
    assert not state.process_live
    events = await all_events(session)
    assert of_kind(events, "session.close") == []
    assert [data(e) for e in of_kind(events, "session.closed")] == [{"how": "close"}]
    assert [data(e)["processEpoch"] for e in of_kind(events, "session.process_stopped")] == [
        done.epoch
    ]


# Messages ---------------------------------------------------------------------------------


async def test_messages_are_delivered_to_the_active_turn_in_order(
    session: SessionRef,
) -> None:
    turn = await session.enqueue(words(200))  # ~10 s
    await streaming(session, turn)

    sent: list[Message] = []
    for i in range(5):
        receipt = await session.send({"n": i})
        assert receipt.kind == "messaged"
        assert receipt.turn.id == turn.id
        assert receipt.message is not None
        sent.append(receipt.message)
    refused = await turn.send({"reject": "no"})
    sent.append(refused)
    assert (await turn.retrieve()).status == "running"  # the sends raced nothing

    outcome = await turn.wait(timeout=60)

    assert outcome.status == "completed"
    events = await all_events(session)
    ids = [m.id for m in sent]
    assert [data(e)["messageId"] for e in of_kind(events, "message.admitted", turn)] == ids
    assert [data(e)["messageId"] for e in of_kind(events, "message.started", turn)] == ids
    assert [data(e)["messageId"] for e in of_kind(events, "message.delivered", turn)] == ids[:5]
    assert [data(e) for e in of_kind(events, "message.rejected", turn)] == [
        {"messageId": refused.id, "reason": "no"}
    ]
    # One handler at a time, in acceptance order: each started after the previous ended.
    steps = {
        (data(e)["messageId"], e.kind): e.sequence for e in events if e.kind.startswith("message.")
    }
    ends = [steps[(m, "message.delivered")] for m in ids[:5]] + [
        steps[(refused.id, "message.rejected")]
    ]
    for i, message in enumerate(ids):
        assert steps[(message, "message.admitted")] < steps[(message, "message.started")]
        assert steps[(message, "message.started")] < ends[i]
        if i:
            assert ends[i - 1] < steps[(message, "message.started")]
    assert message_outputs(events, turn) == [{"n": i} for i in range(5)]


async def test_messages_accepted_as_the_turn_settles_are_rejected_turn_settling(
    session: SessionRef,
) -> None:
    turn = await session.enqueue(words(40))  # ~2 s
    behind = await session.enqueue("behind")
    await streaming(session, turn)

    # Send as fast as one client can until the Turn stops accepting: each send
    # is one request, each delivery four (next, started, output, delivered), so
    # accepted messages queue up and some are still waiting when the handler
    # returns and the Turn settles.
    accepted: list[Message] = []
    refusal = await send_until_refused(turn, accepted)
    assert isinstance(refusal, (TurnNotActive, TurnSettling)), refusal
    outcome = await turn.wait(timeout=60)
    assert outcome.status == "completed"

    events = await all_events(session)
    ids = [m.id for m in accepted]
    assert [data(e)["messageId"] for e in of_kind(events, "message.admitted", turn)] == ids
    delivered = [data(e)["messageId"] for e in of_kind(events, "message.delivered", turn)]
    rejected = [data(e) for e in of_kind(events, "message.rejected", turn)]
    # Every accepted message has one outcome: a prefix delivered in order, and
    # the rest, whose handler never started, rejected by settlement.
    assert delivered == ids[: len(delivered)]
    assert rejected == [{"messageId": m, "reason": "turn_settling"} for m in ids[len(delivered) :]]
    assert rejected, "no message was waiting at settlement; the test proved nothing"
    started = [data(e)["messageId"] for e in of_kind(events, "message.started", turn)]
    assert started == delivered
    assert message_outputs(events, turn) == [{"n": n} for n in range(len(delivered))]
    # Every rejection was recorded with the Turn's outcome, none later.
    completed = of_kind(events, "turn.completed", turn)[0].sequence
    assert all(e.sequence < completed for e in of_kind(events, "message.rejected", turn))
    # Accepted messages keep their exact target: none reached the next Turn.
    assert (await behind.wait(timeout=60)).status == "completed"
    events = await all_events(session)
    assert [e for e in events if e.kind.startswith("message.") and e.turn_id != turn.id] == []
    assert message_outputs(events, behind) == []


async def send_until_refused(turn: TurnRef, accepted: list[Message]) -> Exception:
    for n in range(100_000):
        try:
            accepted.append(await turn.send({"n": n}))
        except Exception as refused:
            return refused
    raise AssertionError("the turn accepted messages for far longer than it runs")


# Idle suspension --------------------------------------------------------------------------


async def test_an_idle_runner_is_suspended_and_the_next_turn_starts_a_new_one(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    idle = 3  # seconds; the CRD's minimum is 1
    create_actor(api_client, namespace, runner_image, idleTimeoutSeconds=idle)
    session = await start_session(helmr, namespace)

    first = await session.enqueue("first")
    done = await first.wait(timeout=120)
    assert done.status == "completed"
    # Within the warm wait the same process takes new work.
    warm = await (await session.enqueue("while warm")).wait(timeout=60)
    assert warm.status == "completed"
    assert warm.epoch == done.epoch
    assert warm.ended_at is not None

    async def suspended() -> Any:
        state = await session.retrieve()
        if state.process_live or runner_pods(core, namespace):
            return None
        return state

    state = await eventually(suspended, timeout=idle + 60, what="the idle runner to end")
    assert state.status == "open"
    assert state.consecutive_failures == 0
    assert state.hold is None
    events = await all_events(session)
    stopped = of_kind(events, "session.process_stopped")
    assert [data(e)["processEpoch"] for e in stopped] == [done.epoch]
    assert of_kind(events, "session.process_failed") == []
    assert of_kind(events, "session.closed") == []
    # It stayed warm for its idle timeout first (a lower bound, clocks of one host).
    assert (stopped[0].created_at - warm.ended_at).total_seconds() >= idle - 0.1

    later = await session.enqueue("after the suspension")
    outcome = await later.wait(timeout=120)

    assert outcome.status == "completed"
    assert outcome.result == {"echo": "after the suspension"}
    assert outcome.epoch is not None
    assert done.epoch is not None
    assert outcome.epoch > done.epoch
    assert (await session.retrieve()).status == "open"
