"""``/metrics`` against a known workload, scraped over HTTP (issue 10, item 1).

One Session of the misbehaving echo runs: a Turn that completes, one that
fails, one interrupted while running (its hold then resumed, with a Turn
queued behind it meanwhile) and that queued one, which crashes its process;
then the Session closes. Each metric is compared, before and after, with what
happened.

The control plane here is one of this test's own, with its own store, serving
only this test's namespace: the shared operator's store keeps earlier tests'
Sessions, which go on changing (their namespaces are being deleted) and would
move the same counters and gauges.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from helmr.client import Client, SessionRef
from helmr.protocol import routes
from helmr.protocol.api_routes import SESSION_TURNS

from .conftest import OWN_PREFIX, Operator, create_namespace, delete_namespace
from .sessions import create_misbehaving_actor, eventually, operator_watches, start_session

Labels = frozenset[tuple[str, str]]
Samples = dict[tuple[str, Labels], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the ``name`` samples carrying ``labels`` (whatever their others)."""
    wanted = set(labels.items())
    return sum(value for (n, have), value in samples.items() if n == name and wanted <= have)


@dataclass
class Change:
    before: Samples
    after: Samples

    def delta(self, name: str, **labels: str) -> float:
        return total(self.after, name, **labels) - total(self.before, name, **labels)

    def now(self, name: str, **labels: str) -> float:
        return total(self.after, name, **labels)


@dataclass
class Metered:
    operator: Operator
    namespace: str
    helmr: Client


@pytest.fixture
async def metered(
    kubeconfig: str,
    crds: None,
    runner_image: str,
    core: client.CoreV1Api,
    api_client: client.ApiClient,
    tmp_path: Path,
) -> AsyncIterator[Metered]:
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    operator = Operator.for_cluster(
        kubeconfig, tmp_path, HELMR_RECONCILE_INTERVAL="0.5", HELMR_STOP_GRACE_SECONDS="3"
    )
    try:
        operator.start(namespaces=namespace)
        create_misbehaving_actor(api_client, namespace, runner_image)
        await operator_watches(api_client, namespace, "misbehaving")
        async with Client(operator.url, operator.token) as helmr:
            yield Metered(operator, namespace, helmr)
    finally:
        operator.stop()
        delete_namespace(core, namespace)


async def _run_workload(helmr: Client, namespace: str, url: str) -> SessionRef:
    session = await start_session(helmr, namespace, "misbehaving")
    completed = await (await session.enqueue("a")).wait(timeout=180)
    assert completed.status == "completed"
    failed = await (await session.enqueue({"raise": "boom"})).wait(timeout=60)
    assert failed.status == "failed"

    stuck = await session.enqueue({"await_signal": 120})

    async def running() -> bool:
        return (await stuck.retrieve()).status == "running"

    await eventually(running, what="the await_signal Turn running")
    receipt = await stuck.interrupt()
    interrupted = await stuck.wait(timeout=60)
    assert (interrupted.status, interrupted.reason) == ("interrupted", "interrupt")
    crash = await session.enqueue({"crash": True})  # waits behind the hold
    held = scrape(url)
    assert total(held, "helmr_sessions_held", reason="interrupt") == 1
    assert total(held, "helmr_sessions", phase="open") == 1
    await session.resume(hold_id=receipt.hold_id)
    crashed = await crash.wait(timeout=60)
    assert (crashed.status, crashed.reason) == ("interrupted", "process_failed")

    async def process_gone() -> bool:
        state = await session.retrieve()
        return not state.process_live and state.consecutive_failures == 1

    await eventually(process_gone, what="the crashed process reported")
    await session.close()

    async def closed() -> bool:
        return (await session.retrieve()).status == "closed"

    await eventually(closed, what="the Session closed")
    return session


EXPECTED_DELTAS: Mapping[tuple[str, tuple[tuple[str, str], ...]], float] = {
    ("helmr_turns_finished_total", (("status", "completed"), ("reason", "none"))): 1,
    ("helmr_turns_finished_total", (("status", "failed"), ("reason", "none"))): 1,
    ("helmr_turns_finished_total", (("status", "interrupted"), ("reason", "interrupt"))): 1,
    ("helmr_turns_finished_total", (("status", "interrupted"), ("reason", "process_failed"))): 1,
    ("helmr_turns_finished_total", ()): 4,
    ("helmr_turn_queue_wait_seconds_count", ()): 4,
    # Every Turn ran on the one runner, which had connected and was idle or held.
    ("helmr_turn_dispatch_seconds_count", ()): 4,
    ("helmr_turn_duration_seconds_count", (("status", "completed"),)): 1,
    ("helmr_turn_duration_seconds_count", (("status", "failed"),)): 1,
    ("helmr_turn_duration_seconds_count", (("status", "interrupted"),)): 2,
    ("helmr_runner_processes_started_total", ()): 1,
    ("helmr_runner_processes_ended_total", (("outcome", "failed"),)): 1,
    ("helmr_runner_processes_ended_total", ()): 1,
    ("helmr_process_failures_total", (("reason", "process_failed"),)): 1,
    ("helmr_process_failures_total", ()): 1,
    ("helmr_runner_cold_start_seconds_count", ()): 1,
    ("helmr_holds_opened_total", (("reason", "interrupt"),)): 1,
    ("helmr_holds_opened_total", ()): 1,
    ("helmr_holds_released_total", (("reason", "interrupt"),)): 1,
    ("helmr_holds_released_total", ()): 1,
    ("helmr_computer_disks_created_total", (("source", "empty"),)): 1,
    # The one completed Turn's save.
    ("helmr_computer_saves_total", (("outcome", "ready"),)): 1,
    ("helmr_computer_save_duration_seconds_count", ()): 1,
    ("helmr_computer_restores_failed_total", ()): 0,
    ("helmr_api_requests_total", (("method", "POST"), ("route", SESSION_TURNS))): 4,
}


def _mismatches(change: Change) -> dict[str, tuple[float, float]]:
    return {
        f"{name}{dict(labels)}": (change.delta(name, **dict(labels)), expected)
        for (name, labels), expected in EXPECTED_DELTAS.items()
        if change.delta(name, **dict(labels)) != expected
    }


async def test_metrics_tell_what_a_known_workload_did(metered: Metered) -> None:
    url = metered.operator.url
    before = scrape(url)
    await _run_workload(metered.helmr, metered.namespace, url)

    # The timeline's facts reach the metrics through the status mirror, a moment later.
    async def settled() -> Change | None:
        change = Change(before, scrape(url))
        return None if _mismatches(change) else change

    try:
        change: Change = await eventually(settled, timeout=120, what="the metrics")
    except AssertionError as timed_out:
        got = _mismatches(Change(before, scrape(url)))
        raise AssertionError(f"(got, expected): {got}") from timed_out

    # Gauges, read from this control plane's own store at the scrape.
    assert change.now("helmr_sessions", phase="closed") == 1
    assert change.now("helmr_sessions", phase="open") == 0
    assert change.now("helmr_sessions_held") == 0
    assert change.now("helmr_sessions_waiting_for_runner") == 0
    assert change.now("helmr_leader") == 1
    # Durations are plausible: a cold start takes a while, a wait is never negative.
    assert 0 < change.delta("helmr_runner_cold_start_seconds_sum") < 300
    assert change.delta("helmr_turn_queue_wait_seconds_sum") > 0
    assert change.delta("helmr_turn_dispatch_seconds_sum") >= 0
    # The store was timed, both ways, in both lanes (the API's enqueue, the supervisor's
    # process start); the runner's calls are counted by route template. A Turn reaches
    # the runner by a receive or by a settlement's next (runner protocol 5 holds that
    # reply until a Turn comes), so the receives are not one per Turn.
    store = "helmr_store_transaction_duration_seconds_count"
    assert change.delta(store, kind="write", lane="requests") > 0
    assert change.delta(store, kind="write", lane="background") > 0
    assert change.delta(store, kind="read") > 0
    for route in (routes.RECEIVE, routes.COMPLETE, routes.FAIL):
        assert change.delta("helmr_api_requests_total", route=route) >= 1, route
