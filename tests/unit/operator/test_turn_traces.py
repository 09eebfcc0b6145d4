"""Each Turn's trace, from the composed control plane (store, Control, REST app) into
OpenTelemetry's in-memory exporter: one trace per Turn, its steps as spans."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from helmr.operator.telemetry.otel import OtelSink, span_id, trace_id
from helmr.operator.telemetry.tracing import from_environ
from helmr.operator.telemetry.turn_traces import TurnTraces
from helmr.server import StaticAuthenticator, StaticRunnerTokens, build_app
from tests.compose import open_plane
from tests.unit.api import GRANTS, NAMESPACE, Api, RecordingMirror

STEPS = {"turn.admission", "turn.queue_wait", "turn.dispatch", "turn.handler", "turn.settlement"}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traces(exporter: InMemorySpanExporter) -> TurnTraces:
    return TurnTraces(OtelSink(SimpleSpanProcessor(exporter)))


@pytest.fixture
async def api(tmp_path: Path, traces: TurnTraces) -> AsyncIterator[Api]:
    async with open_plane(tmp_path / "helmr.db") as plane:
        tokens, mirror = StaticRunnerTokens(), RecordingMirror()
        app = build_app(plane.control, StaticAuthenticator(GRANTS), tokens, traces=traces)
        async with TestClient(TestServer(app)) as http:
            yield Api(plane.control, app, http, tokens, mirror)


async def follow_timeline(api: Api, traces: TurnTraces, session_id: str, *, emit: bool) -> None:
    """What the status mirror does with each event it follows."""
    for event in (await api.control.list_events(session_id, 0, 1000)).records:
        traces.observe(event, emit=emit)


def of_turn(spans: Sequence[ReadableSpan], turn_id: str) -> dict[str, ReadableSpan]:
    mine = [s for s in spans if s.attributes and s.attributes.get("helmr.turn.id") == turn_id]
    named = {s.name: s for s in mine}
    assert len(named) == len(mine), "a step was traced twice"
    return named


async def test_each_turn_is_one_trace_of_its_steps_with_their_times(
    api: Api, traces: TurnTraces, exporter: InMemorySpanExporter
) -> None:
    sid = await api.start()
    first = await api.enqueue(sid, "a", idempotency_key="a")
    assert await api.enqueue(sid, "a", idempotency_key="a") == first  # no second admission
    second = await api.enqueue(sid, "b")
    _, headers = await api.run_turn(sid)
    turn_path = f"/runner/v1/sessions/{sid}/turns"
    await api.call("POST", f"{turn_path}/{first}/complete", headers=headers, json={"result": 1})
    receive = f"/runner/v1/sessions/{sid}/receive"
    assert (await api.call("POST", receive, headers=headers, json={"timeout": 5}))["id"] == second
    error = {"code": "tool_error", "message": "no such file"}
    await api.call("POST", f"{turn_path}/{second}/fail", headers=headers, json={"error": error})
    await follow_timeline(api, traces, sid, emit=True)
    (save,) = await api.control.saves_to_step()
    traces.save_ended(await api.control.save_ready(NAMESPACE, save.workspace, save.version))

    spans = exporter.get_finished_spans()
    done, failed = of_turn(spans, first), of_turn(spans, second)
    assert set(done) == {"turn", "turn.save", *STEPS}
    assert set(failed) == {"turn", *STEPS}
    for turn_id, steps in ((first, done), (second, failed)):
        root = steps["turn"]
        assert root.parent is None
        assert root.context.trace_id == trace_id(turn_id)
        assert root.context.span_id == span_id(turn_id, "turn")
        for step in steps.values():
            assert step.context.trace_id == root.context.trace_id
            if step is not root:
                assert step.parent is not None
                assert step.parent.span_id == root.context.span_id
            assert step.start_time is not None
            assert step.end_time is not None
            assert step.start_time <= step.end_time
        # The steps follow one another: admitted, queued, running, settling, ended.
        assert steps["turn.admission"].end_time == root.start_time
        assert steps["turn.queue_wait"].start_time == root.start_time
        assert steps["turn.queue_wait"].end_time == steps["turn.handler"].start_time
        assert steps["turn.dispatch"].end_time == steps["turn.handler"].start_time
        assert steps["turn.handler"].end_time == steps["turn.settlement"].start_time
        assert steps["turn.settlement"].end_time == root.end_time
    # The second could start only once the first had ended.
    assert failed["turn.dispatch"].start_time == done["turn"].end_time
    assert done["turn.save"].start_time == done["turn"].end_time  # requested as it completed
    assert done["turn"].status.status_code == StatusCode.UNSET
    assert failed["turn"].status.status_code == StatusCode.ERROR
    assert failed["turn"].status.description == "tool_error: no such file"
    assert failed["turn"].attributes is not None
    assert failed["turn"].attributes["helmr.turn.status"] == "failed"


async def test_a_covered_save_ends_with_the_save_that_covered_it(
    api: Api, traces: TurnTraces, exporter: InMemorySpanExporter
) -> None:
    sid = await api.start()
    turns = [await api.enqueue(sid, f"t{n}") for n in range(3)]
    _, headers = await api.run_turn(sid)
    turn_path, receive = f"/runner/v1/sessions/{sid}/turns", f"/runner/v1/sessions/{sid}/receive"
    for n, turn_id in enumerate(turns):
        if n:
            await api.call("POST", receive, headers=headers, json={"timeout": 5})
        await api.call("POST", f"{turn_path}/{turn_id}/complete", headers=headers, json={})
    (first, *_) = await api.control.saves_to_step()
    workspace = first.workspace
    await api.control.take_save(NAMESPACE, workspace, 2)  # covers save 1
    await api.control.save_failed(NAMESPACE, workspace, 2, "no space")
    await api.control.take_save(NAMESPACE, workspace, 3)  # covers 1 and 2
    traces.save_ended(await api.control.save_ready(NAMESPACE, workspace, 3))
    for save in await api.control.covered_saves(NAMESPACE, workspace, 3):
        traces.save_ended(save)

    spans = exporter.get_finished_spans()
    taken = of_turn(spans, turns[2])["turn.save"]
    for turn_id in turns[:2]:
        span = of_turn(spans, turn_id)["turn.save"]
        assert span.status.status_code == StatusCode.UNSET  # its state is committed
        assert span.end_time == taken.end_time  # when the save that covered it was ready
        assert span.attributes is not None
        status = span.attributes["helmr.save.status"], span.attributes["helmr.save.covered_by"]
        assert status == ("covered", 3)


async def test_an_interrupted_turn_has_no_settlement_and_old_events_emit_nothing(
    api: Api, traces: TurnTraces, exporter: InMemorySpanExporter
) -> None:
    sid = await api.start()
    await api.enqueue(sid, "a")
    turn_id, _ = await api.run_turn(sid)
    await api.call("POST", f"/v1/sessions/{sid}/interrupt", json={})
    epoch = (await api.control.get_session(sid)).process_epoch
    await api.control.process_exited(sid, epoch, 0)  # its process let go of it

    # A restarted control plane reads the timeline again: it emits nothing old.
    restarted = TurnTraces(OtelSink(SimpleSpanProcessor(exporter)))
    await follow_timeline(api, restarted, sid, emit=False)
    assert {s.name for s in exporter.get_finished_spans()} == {"turn.admission"}

    await follow_timeline(api, traces, sid, emit=True)
    steps = of_turn(exporter.get_finished_spans(), turn_id)
    assert set(steps) == STEPS - {"turn.settlement"} | {"turn"}
    assert steps["turn.handler"].end_time == steps["turn"].end_time
    assert steps["turn"].attributes is not None
    assert steps["turn"].attributes["helmr.turn.status"] == "interrupted"


def test_without_an_endpoint_nothing_of_opentelemetry_is_imported() -> None:
    # A fresh interpreter: this one has imported the SDK for the tests above.
    check = (
        "import sys, helmr.operator.control_plane, helmr.runner.entrypoint\n"
        "from helmr.operator.telemetry.tracing import from_environ\n"
        "assert from_environ({}) is None\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    subprocess.run([sys.executable, "-c", check], check=True, env=env, timeout=60)


def test_an_endpoint_turns_tracing_on() -> None:
    traces = from_environ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert traces is not None
    traces.shutdown()
    assert from_environ({"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}) is None
