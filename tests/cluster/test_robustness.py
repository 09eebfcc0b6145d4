"""The control plane dying under running turns, and fencing of stale or foreign runners.

- The operator process is SIGKILLed ten times, each time while a turn runs in
  the session's runner pod, and started again. The runner pod is not touched,
  so its execution is not lost: the spec leaves no room for any turn to end
  other than completed, none may run twice or lose output, and the session
  never has two runner pods (watched at the apiserver, every change). A
  Turn applied with the Kubernetes API while the operator is down is
  admitted once, in order, when it is back.
- A zombie runner (the previous process epoch, with its pod's real token)
  tries every runner write after a newer epoch took over: its pod is gone, so
  its token is too, each is refused (401) and nothing reaches the timeline.
- A runner token of session A is refused on session B's runner routes, and
  on the public API.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any, cast

import aiohttp
from kubernetes import client

from helmr.client import Client, Event, SessionRef, TurnRef
from helmr.operator.runners import pods
from helmr.protocol import EPOCH_HEADER, MessageOutcome, routes
from helmr.resources import API_VERSION, GROUP, TURNS, VERSION

from .conftest import Operator
from .pods import PodHistory
from .sessions import (
    all_events,
    create_misbehaving_actor,
    eventually,
    runner_token,
    start_session,
    two_sessions,
)

KILLS = 10


def operator_log_tail(operator: Operator, lines: int = 60) -> str:
    return "\n".join(operator.log.read_text(errors="replace").splitlines()[-lines:])


def texts(events: list[Event], turn_id: str) -> list[str]:
    """The text fragments of a turn's output, in timeline order."""
    out = []
    for event in events:
        if event.kind == "turn.output" and event.turn_id == turn_id:
            assert isinstance(event.data, list)
            for part in event.data:
                assert isinstance(part, dict)
                out.append(str(part.get("text")))
    return out


def echo_fragments(input: Any) -> list[str]:
    """What the echo actor writes for ``input``: each word of its text, plus a space."""
    text = input if isinstance(input, str) else json.dumps(input)
    return [word + " " for word in text.split(" ")]


# --- (a) SIGKILL of the control plane during running turns -------------------------------


async def test_operator_sigkilled_during_running_turns_loses_nothing_and_runs_nothing_twice(
    operator: Operator,
    api_client: client.ApiClient,
    namespace: str,
    runner_image: str,
    pod_history: PodHistory,
) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    actor = create_misbehaving_actor(api_client, namespace, runner_image)
    # Each victim sleeps 2 s then streams ~20 fragments (~1 s): a kill up to 2.8 s
    # after it started lands while it runs, in its sleep or amid its output.
    inputs: list[Any] = []
    for i in range(KILLS):
        inputs.append({"sleep": 2, "text": " ".join(f"r{i}w{j}" for j in range(16))})
        inputs.append(f"after kill {i}")
    async with Client(operator.url, operator.token) as helmr:
        session = await start_session(helmr, namespace, actor)
        refs = [await session.enqueue(value) for value in inputs]
        session_name = (await session.retrieve()).name
    victims = refs[::2]
    custom = client.CustomObjectsApi(api_client)

    kills: list[tuple[str, datetime]] = []
    applied: list[str] = []  # Turn CRs applied while the operator was down
    try:
        for i, victim in enumerate(victims):
            async with Client(operator.url, operator.token) as helmr:
                ref = helmr.sessions.ref(session.id).turn(victim.id)
                await eventually(
                    lambda ref=ref: _is_running(ref), timeout=120, what=f"victim {i} running"
                )
            await asyncio.sleep(rng.uniform(0.0, 2.8))
            kills.append((victim.id, datetime.now(UTC)))
            operator.kill()
            applied.append(f"applied-while-down-{i}")
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, TURNS, turn_cr(applied[-1], session_name)
            )
            await asyncio.sleep(rng.uniform(0.0, 2.0))  # the runner retries meanwhile
            operator.start()
    finally:
        if operator.process is None or operator.process.poll() is not None:
            operator.start()  # leave the shared operator running for the next test

    def admitted() -> list[str] | None:
        ids: list[str] = []
        for name in applied:
            cr = cast(
                dict[str, Any],
                custom.get_namespaced_custom_object(GROUP, VERSION, namespace, TURNS, name),
            )
            turn_id = (cr.get("status") or {}).get("turnId")
            if turn_id is None:
                return None
            ids.append(str(turn_id))
        return ids

    applied_ids: list[str] = await eventually(admitted, timeout=120, what="applied Turns admitted")
    inputs += applied
    async with Client(operator.url, operator.token) as helmr:
        session = helmr.sessions.ref(session.id)
        last = await session.turn(applied_ids[-1]).wait(timeout=300)
        ids = [ref.id for ref in refs] + applied_ids
        turns = [await session.turn(turn_id).retrieve() for turn_id in ids]
        events = await all_events(session)
        state = await session.retrieve()
    pod_history.stop()

    context = f"seed {seed}; operator log:\n{operator_log_tail(operator)}"
    assert last.terminal, context
    # Every kill landed while its victim ran (the test's own premise).
    by_id = {t.id: t for t in turns}
    for victim_id, killed_at in kills:
        victim_turn = by_id[victim_id]
        assert victim_turn.started_at is not None
        assert victim_turn.ended_at is not None
        assert victim_turn.started_at <= killed_at <= victim_turn.ended_at, context
    # The runner was never lost, so no turn was lost or interrupted: all completed,
    # in FIFO order, each with its own result; each Turn applied while the operator
    # was down was admitted once, after those before it.
    assert [t.status for t in turns] == ["completed"] * len(inputs), (
        [(t.status, t.reason, t.error) for t in turns],
        context,
    )
    assert [t.sequence for t in turns] == list(range(1, len(inputs) + 1))
    assert [t.result for t in turns] == [{"echo": value} for value in inputs]
    starts = [t.started_at for t in turns]
    assert starts == sorted(starts)  # type: ignore[type-var]
    # One process ran them all: the restarts neither replaced nor doubled it.
    assert {t.epoch for t in turns} == {1}, context
    assert state.process_epoch == 1
    assert state.consecutive_failures == 0
    # The timeline: gap-free, every turn ran exactly once (one turn.running, one
    # terminal event), and its handler's output is there exactly once, in order.
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    running = Counter(e.turn_id for e in events if e.kind == "turn.running")
    assert running == Counter({t.id: 1 for t in turns}), running
    assert [e.turn_id for e in events if e.kind == "turn.running"] == [t.id for t in turns]
    completed = Counter(e.turn_id for e in events if e.kind == "turn.completed")
    assert completed == Counter({t.id: 1 for t in turns}), completed
    for turn, value in zip(turns, inputs, strict=True):
        assert texts(events, turn.id) == echo_fragments(value), (turn.id, context)
    lifecycle = {e.kind for e in events if e.kind.startswith("session.")}
    assert not lifecycle & {
        "session.process_failed",
        "session.process_stopped",
        "session.execution_lost",
    }, lifecycle
    # Never two runner pods, and exactly one from its creation to the end.
    assert pod_history.added == [pods.pod_name(state.name, 1)], pod_history.added
    assert pod_history.deleted == []
    first = pod_history.counts.index(1)
    assert max(pod_history.counts) == 1, pod_history.counts
    assert set(pod_history.counts[first:]) == {1}, pod_history.counts
    assert max(pod_history.live_counts) == 1, pod_history.live_counts


def turn_cr(name: str, session_name: str) -> dict[str, Any]:
    """A Turn as ``kubectl apply`` would create it; its input is its name."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Turn",
        "metadata": {"name": name},
        "spec": {"sessionRef": {"name": session_name}, "input": name},
    }


async def _is_running(ref: TurnRef) -> bool:
    turn = await ref.retrieve()
    assert turn.status in ("queued", "running"), f"{ref.id} is {turn.status} before its kill"
    return bool(turn.status == "running")


# --- (b) a fenced zombie runner, and a token of another session ------------------------


class Runner:
    """Runner-protocol calls made by hand, as a runner process (or an impostor) would."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str) -> None:
        self._http = http
        self._url = url
        self._token = token

    async def post(
        self, path: str, epoch: int, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        async with self._http.post(
            self._url + path,
            json={} if body is None else body,
            headers={"Authorization": f"Bearer {self._token}", EPOCH_HEADER: str(epoch)},
        ) as reply:
            data = await reply.json(content_type=None)
            return reply.status, data if isinstance(data, dict) else {}

    async def writes(self, session_id: str, turn_id: str, epoch: int) -> dict[str, tuple[int, Any]]:
        """Every runner call, each trying to change something; their answers by name."""
        turn_calls: dict[str, tuple[str, dict[str, Any]]] = {
            "turn_output": (
                routes.turn_output(session_id, turn_id),
                {"value": "zombie output", "idempotency_key": f"zombie-{epoch}-{turn_id}"},
            ),
            "respond": (routes.respond(session_id, turn_id), {"value": "zombie response"}),
            "messages_ready": (routes.messages_ready(session_id, turn_id), {}),
            "messages_next": (routes.messages_next(session_id, turn_id), {"timeout": 1}),
            "message_started": (
                routes.message_outcome(session_id, turn_id, "msg_x", MessageOutcome.STARTED),
                {},
            ),
            "complete": (routes.complete(session_id, turn_id), {"result": "zombie result"}),
            "fail": (
                routes.fail(session_id, turn_id),
                {"error": {"code": "zombie", "message": "zombie failure"}},
            ),
        }
        calls: dict[str, tuple[str, dict[str, Any]]] = {
            "receive": (routes.receive(session_id), {"timeout": 1}),
            "session_output": (
                routes.session_output(session_id),
                {"value": "zombie session output", "idempotency_key": f"zombie-{epoch}"},
            ),
            **turn_calls,
        }
        answers = {}
        for name, (path, body) in calls.items():
            status, data = await self.post(path, epoch, body)
            answers[name] = (status, data.get("error", {}).get("code"))
        return answers


def zombie_marks(events: list[Event]) -> list[Event]:
    return [e for e in events if "zombie" in json.dumps(e.data)]


async def test_zombie_runner_of_an_older_epoch_is_fenced_from_every_write(
    misbehaving_session: SessionRef,
    operator: Operator,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    session = misbehaving_session  # its {"sleep": s} keeps a turn running
    # Epoch 1 runs a turn that will still be running when its execution is lost.
    lost = await session.enqueue({"sleep": 600})
    await eventually(lambda: _is_running(lost), timeout=120, what="the first turn running")
    view = await session.retrieve()
    assert (view.process_epoch, view.process_live) == (1, True)
    token = runner_token(core, namespace, view.name, 1)

    # Its pod is deleted (as a drain or a user would): a newer epoch takes over.
    core.delete_namespaced_pod(pods.pod_name(view.name, 1), namespace)
    lost_outcome = await lost.wait(timeout=120)
    current = await session.enqueue({"sleep": 8})
    await eventually(lambda: _is_running(current), timeout=120, what="a turn on epoch 2")
    view = await session.retrieve()
    assert (view.process_epoch, view.process_live) == (2, True)
    behind = await session.enqueue("queued behind")  # what a zombie's receive could steal

    async with aiohttp.ClientSession() as http:
        zombie = Runner(http, operator.url, token)
        on_current = await zombie.writes(session.id, current.id, epoch=1)
        on_lost = await zombie.writes(session.id, lost.id, epoch=1)
        from_the_future = await zombie.writes(session.id, current.id, epoch=3)

    # Its token was bound to its pod: with the pod gone the apiserver no longer
    # vouches for it, so nothing it sends is even read (a zombie whose pod still
    # exists would be fenced instead: 409 stale_epoch, Control's unit tests).
    refused = dict.fromkeys(on_current, (401, "unauthenticated"))
    assert on_current == refused
    assert on_lost == refused
    assert from_the_future == refused
    # The real epoch-2 runner is undisturbed and its turn is the only outcome.
    done = await current.wait(timeout=120)
    assert done.status == "completed"
    assert done.result == {"echo": {"sleep": 8}}
    assert done.response == 'echo: {"sleep": 8}'
    assert done.epoch == 2
    after = await behind.wait(timeout=120)
    assert (after.status, after.epoch, after.result) == (
        "completed",
        2,
        {"echo": "queued behind"},
    )
    # The lost turn keeps the outcome of its loss (spec: the interrupted execution's
    # active turn is not replayed and no late write changes it).
    assert lost_outcome.status == "interrupted", lost_outcome
    assert lost_outcome.reason == "computer_execution_lost", lost_outcome
    assert (await lost.retrieve()) == lost_outcome
    events = await all_events(session)
    assert zombie_marks(events) == []
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    # Epoch 1 wrote nothing after its loss: its facts are the lost turn's and the
    # loss's (process_failed with reason execution_lost, execution_lost, recovery_gap).
    of_epoch_1 = [(e.kind, e.turn_id) for e in events if e.process_epoch == 1]
    assert set(of_epoch_1) <= {
        ("turn.running", lost.id),
        ("turn.interrupted", lost.id),
        ("session.process_failed", None),
        ("session.execution_lost", None),
        ("session.recovery_gap", None),
    }, of_epoch_1
    running = [(e.turn_id, e.data) for e in events if e.kind == "turn.running"]
    assert running == [
        (lost.id, {"processEpoch": 1}),
        (current.id, {"processEpoch": 2}),
        (behind.id, {"processEpoch": 2}),
    ]
    kinds = [e.kind for e in events if e.kind.startswith("session.")]
    assert "session.execution_lost" in kinds, kinds
    # The loss is recorded as process_failed with reason execution_lost (002), and
    # is no counted failure: nothing the zombie did was one.
    failed = [e.data for e in events if e.kind == "session.process_failed"]
    assert failed == [{"processEpoch": 1, "reason": "execution_lost", "holdId": None}], failed
    assert (await session.retrieve()).consecutive_failures == 0


async def test_runner_token_of_one_session_cannot_act_on_another(
    helmr: Client,
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    a, b = await two_sessions(helmr, api_client, namespace, runner_image)
    warm = await a.enqueue("a runs")  # so A's runner pod exists
    target = await b.enqueue({"sleep": 8})
    await eventually(lambda: _is_running(target), timeout=120, what="B's turn running")
    assert (await warm.wait(timeout=120)).status == "completed"
    a_view, b_view = await a.retrieve(), await b.retrieve()
    a_token = runner_token(core, namespace, a_view.name, a_view.process_epoch)
    b_token = runner_token(core, namespace, b_view.name, b_view.process_epoch)
    assert a_token != b_token

    async with aiohttp.ClientSession() as http:
        impostor = Runner(http, operator.url, a_token)
        # B's live epoch and active turn: only the token is wrong.
        answers = await impostor.writes(b.id, target.id, epoch=b_view.process_epoch)
        # And the other way round: B's token on A's session.
        swapped = await Runner(http, operator.url, b_token).writes(
            a.id, warm.id, epoch=a_view.process_epoch
        )
        anonymous = await Runner(http, operator.url, "").writes(
            b.id, target.id, epoch=b_view.process_epoch
        )
        async with http.get(
            f"{operator.url}/v1/sessions/{b.id}/events",
            headers={"Authorization": f"Bearer {a_token}"},
        ) as reply:
            public_status = reply.status

    forbidden = dict.fromkeys(answers, (403, "forbidden"))
    assert answers == forbidden
    assert swapped == forbidden
    assert {status for status, _ in anonymous.values()} <= {401, 403}, anonymous
    assert public_status == 401
    done = await target.wait(timeout=120)
    assert done.status == "completed"
    assert done.result == {"echo": {"sleep": 8}}
    for ref in (a, b):
        events = await all_events(ref)
        assert zombie_marks(events) == []
    assert (await b.retrieve()).process_epoch == b_view.process_epoch
