"""Turns run in real runner pods: FIFO order, streamed output, deadlines."""

from __future__ import annotations

from kubernetes import client

from helmr.client import Client, SessionRef

from .sessions import all_events, create_misbehaving_actor, eventually, start_session


async def test_fifty_turns_run_in_fifo_order_with_gap_free_sequences(
    session: SessionRef,
) -> None:
    refs = [await session.enqueue(f"turn {i}") for i in range(50)]
    last = await refs[-1].wait(timeout=300)

    assert last.status == "completed"
    turns = [await ref.retrieve() for ref in refs]
    assert [t.status for t in turns] == ["completed"] * 50
    assert [t.sequence for t in turns] == list(range(1, 51))
    assert [t.result for t in turns] == [{"echo": f"turn {i}"} for i in range(50)]
    starts = [t.started_at.timestamp() for t in turns if t.started_at is not None]
    assert starts == sorted(starts)
    assert len(starts) == 50
    events = await all_events(session)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    running = [e.turn_id for e in events if e.kind == "turn.running"]
    assert running == [t.id for t in turns]


async def test_output_is_readable_while_the_turn_runs(
    session: SessionRef,
) -> None:
    words = " ".join(f"w{i}" for i in range(60))  # ~3 s of streamed fragments

    turn = await session.enqueue(words)

    async def first_output() -> bool:
        page = await session.events.list(after=0, limit=1000)
        return any(e.kind == "turn.output" and e.turn_id == turn.id for e in page.records)

    await eventually(first_output, what="the first output fragment")
    assert (await turn.retrieve()).status == "running"
    assert (await turn.wait(timeout=60)).status == "completed"


async def test_turn_past_max_turn_duration_is_interrupted_and_next_runs_on_new_process(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    actor = create_misbehaving_actor(api_client, namespace, runner_image, maxTurnDurationSeconds=3)
    session = await start_session(helmr, namespace, actor)

    stuck = await session.enqueue({"sleep": 120})  # ignores cancellation
    after = await session.enqueue("after the deadline")
    outcome = await stuck.wait(timeout=60)
    following = await after.wait(timeout=60)

    assert outcome.status == "interrupted"
    assert outcome.reason == "turn_deadline_elapsed"
    assert outcome.started_at is not None
    assert outcome.ended_at is not None
    assert (outcome.ended_at - outcome.started_at).total_seconds() < 3 + 10
    assert following.status == "completed"
    assert following.epoch is not None
    assert outcome.epoch is not None
    assert following.epoch > outcome.epoch
    events = await all_events(session)
    interrupted = [e for e in events if e.kind == "turn.interrupted"]
    assert [e.data["reason"] for e in interrupted] == ["turn_deadline_elapsed"]  # type: ignore[call-overload]
