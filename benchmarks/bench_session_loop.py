"""Session-loop latency against a real cluster, beside what Kubernetes itself costs.

Starts a real control plane (``kopf run -m helmr.operator.kopf``, as the cluster
tests do) on this host and measures, in one run:

warm (the session's runner pod is up and idle, long-polling ``receive``):
  - the apiserver's own create-to-watch latency: a ConfigMap is created and
    timed until a watch already open sees it;
  - enqueue → handler start over the REST API (``POST .../turns``): until the
    ``turn.running`` record (the dispatch the runner's ``receive`` answers
    with), and until the turn's first ``turn.output`` (written by the echo
    handler, so an upper bound on the handler having started);
  - the same for a ``Turn`` applied to the apiserver (the kubectl path: apiserver
    → the operator's watch → admission → dispatch);
  - stop request → ``turn.signal`` observed: a Turn interrupt of a handler busy
    in a long call (the misbehaving actor's ``{"await_signal": s}``, which
    notes its wall clock the moment its signal fires), against the time the
    interrupt request was sent; and request → accepted (the receipt);

cold:
  - a bare pod from the runner image on the same node, created → ``Running``
    and → its first log line (timestamped by the container runtime), and the
    same pod printing only after importing what a runner imports first, and
    that pod again with a fresh PVC mounted as a runner's Computer disk is
    (created just before it, of the Actor's size: a session's cold start
    always gets a fresh disk), and with all of a runner pod's volumes (that
    disk, the projected runner token, ``/tmp``: the floor of a session's cold
    start);
  - a Helmr session started and a turn enqueued → its runner pod created →
    ``Running`` → the first ``turn.running``;
  - each step of both on the way (the client's calls answered, pod created,
    claim bound, pod scheduled, ``Running``), to show where the time goes.

The two kinds alternate, one pod at a time, so they share the node's load.

Every timestamp is this host's wall clock (the control plane runs here; the
node's containerd shares the clock), so differences across them are valid.
Figures are printed, never asserted.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_session_loop.py [--turns 100] [--cold 10] \\
        [--signals 50] [--no-build --image REF]

``--image`` runs another reference of the runner image already on the node:
other checkouts on the machine import their own builds as
``helmr.local/runner:dev`` (the cluster tests do), so a long run is safest on a
copy tagged for it (``ctr -n k8s.io images tag helmr.local/runner:dev REF``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (
    BARE,
    BARE_LABEL,
    RUNNER_LABEL,
    ClaimTimes,
    PodTimes,
    Table,
    bare_pod,
    bench_namespace,
    control_plane,
    first,
    fresh_claim,
    log_line_time,
    new_api_client,
    no_pods_left,
    prepare,
    resource_version,
)
from kubernetes import client, config, watch
from tests.cluster import conftest
from tests.cluster.sessions import (
    MISBEHAVING,
    all_events,
    create_actor,
    create_misbehaving_actor,
    signal_heard,
    start_session,
)

from helmr.client import Client, Event, SessionRef
from helmr.operator.runners import pods
from helmr.resources import API_VERSION, GROUP, TURNS, VERSION

CM_LABEL = "bench=configmap"


# --- the cluster side ---------------------------------------------------------------------


def configmap_latencies(kubeconfig: str, namespace: str, n: int) -> list[float]:
    """Create → seen by an already open watch, one ConfigMap at a time."""
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    seen: dict[str, float] = {}
    cond = threading.Condition()
    version = resource_version(core.list_namespaced_config_map(namespace, label_selector=CM_LABEL))
    stop = threading.Event()

    def follow() -> None:
        nonlocal version
        while not stop.is_set():
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_config_map,
                namespace,
                label_selector=CM_LABEL,
                resource_version=version,
                timeout_seconds=2,
            )
            for event in stream:
                at = time.time()
                version = event["object"].metadata.resource_version
                if event["type"] == "ADDED":
                    with cond:
                        seen[event["object"].metadata.name] = at
                        cond.notify_all()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    time.sleep(0.5)  # the watch is open
    latencies = []
    for i in range(n):
        name = f"bench-{i}"
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels={"bench": "configmap"}),
            data={"i": str(i)},
        )
        started = time.time()
        core.create_namespaced_config_map(namespace, body)
        with cond:
            if not cond.wait_for(lambda name=name: name in seen, 30):  # type: ignore[misc]
                raise TimeoutError(f"the watch never saw {name}")
            latencies.append(seen[name] - started)
        time.sleep(0.05)
    stop.set()
    return latencies


# --- the Helmr side -----------------------------------------------------------------------


IMPORTS = "import helmr.runner.entrypoint, echo.echo; " + BARE
"""The same after importing what a runner process imports before its first call."""

DISK_SIZE = "1Gi"
"""The echo Actor's Computer disk (the Actor's default ``computer.size``)."""


def with_runner_volumes(pod: client.V1Pod) -> None:
    """Adds what a runner pod mounts beside its disk: its projected token (the kubelet
    asks the apiserver for it before the container starts) and its ``/tmp``."""
    token = client.V1ServiceAccountTokenProjection(
        audience=pods.RUNNER_AUDIENCE, expiration_seconds=pods.TOKEN_SECONDS, path=pods.TOKEN_PATH
    )
    projected = client.V1ProjectedVolumeSource(
        sources=[client.V1VolumeProjection(service_account_token=token)]
    )
    spec = pod.spec
    assert spec is not None
    container = spec.containers[0]
    spec.volumes = [
        *(spec.volumes or ()),
        client.V1Volume(name="runner-token", projected=projected),
        client.V1Volume(name="tmp", empty_dir=client.V1EmptyDirVolumeSource()),
    ]
    container.volume_mounts = [
        *(container.volume_mounts or ()),
        client.V1VolumeMount(name="runner-token", mount_path=pods.TOKEN_DIR, read_only=True),
        client.V1VolumeMount(name="tmp", mount_path="/tmp"),
    ]


class Timeline:
    """Follows a session's timeline (SSE) so the benchmark can wait on it."""

    def __init__(self, session: SessionRef) -> None:
        self.session = session
        self.events: list[Event] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        async for event in self.session.events.stream(after=0):
            async with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    async def until(self, done: Callable[[list[Event]], bool], timeout: float = 120) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: done(self.events))

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e.kind == kind)

    async def close(self) -> None:
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task


def turn_cr(name: str, session_name: str, input: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Turn",
        "metadata": {"name": name},
        "spec": {"sessionRef": {"name": session_name}, "input": input},
    }


async def warm_turns(
    helmr: Client, api: client.ApiClient, namespace: str, turns: int
) -> dict[str, list[float]]:
    session = await start_session(helmr, namespace)
    timeline = Timeline(session)
    custom = client.CustomObjectsApi(api)
    try:
        warmup = await session.enqueue("warm up")
        await timeline.until(lambda ev: any(e.kind == "turn.completed" for e in ev), 180)
        assert (await warmup.retrieve()).status == "completed"
        rest_started: dict[str, float] = {}
        for i in range(turns):
            await asyncio.sleep(0.1)  # the runner is back in its receive long poll
            started = time.time()
            ref = await session.enqueue(f"rest {i}")
            rest_started[ref.id] = started
            done = i + 2
            await timeline.until(lambda ev, done=done: _completed(ev) >= done)  # type: ignore[misc]
        name = (await session.retrieve()).name
        cr_started: list[float] = []
        for i in range(turns):
            await asyncio.sleep(0.1)
            started = time.time()
            await asyncio.to_thread(
                custom.create_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                TURNS,
                turn_cr(f"bench-{i}", name, f"cr {i}"),
            )
            cr_started.append(started)
            done = turns + i + 2
            await timeline.until(lambda ev, done=done: _completed(ev) >= done)  # type: ignore[misc]
        events = timeline.events
    finally:
        await timeline.close()
    running = [e for e in events if e.kind == "turn.running"]
    assert len(running) == 2 * turns + 1, len(running)
    out: dict[str, list[float]] = {"rest_running": [], "rest_output": [], "cr_running": []}
    for turn_id, started in rest_started.items():
        out["rest_running"].append(first(events, "turn.running", turn_id) - started)
        out["rest_output"].append(first(events, "turn.output", turn_id) - started)
    cr_running = running[1 + turns :]
    for event, started in zip(cr_running, cr_started, strict=True):
        out["cr_running"].append(event.created_at.timestamp() - started)
    await session.cancel()
    return out


async def stop_signals(helmr: Client, namespace: str, samples: int) -> dict[str, list[float]]:
    """Turn interrupt → the busy handler's signal, one Turn at a time on a warm runner."""
    # Its own Workspace: the warm session's is released only once that one has closed.
    session, _ = await helmr.actors.start(MISBEHAVING, namespace=namespace, workspace="signals")
    timeline = Timeline(session)
    out: dict[str, list[float]] = {"accepted": [], "signalled": [], "accepted_to_signal": []}
    try:
        for i in range(samples):
            turn = await session.enqueue({"await_signal": 60, "i": i})
            await timeline.until(lambda ev, t=turn.id: _has(ev, "turn.running", t), 180)  # type: ignore[misc]
            await asyncio.sleep(0.1)  # the runner's stop channel is open for this Turn
            started = time.time()
            receipt = await turn.interrupt()
            out["accepted"].append(receipt.accepted_at.timestamp() - started)
            await timeline.until(lambda ev, t=turn.id: _has(ev, "turn.interrupted", t))  # type: ignore[misc]
            heard = signal_heard(timeline.events, turn.id)
            assert heard is not None, f"turn {turn.id}: the handler heard no signal"
            assert heard["signal"] == "stop_requested", heard
            out["signalled"].append(float(heard["at"]) - started)
            out["accepted_to_signal"].append(float(heard["at"]) - receipt.accepted_at.timestamp())
            await session.resume(hold_id=receipt.hold_id)
        failed = timeline.count("session.process_failed")
        assert failed == 0, f"{failed} processes failed: a handler did not hear its signal"
    finally:
        await timeline.close()
    await session.cancel()
    return out


def _has(events: list[Event], kind: str, turn_id: str) -> bool:
    return any(e.kind == kind and e.turn_id == turn_id for e in events)


def _completed(events: list[Event]) -> int:
    return sum(1 for e in events if e.kind == "turn.completed")


async def cold_starts(
    helmr: Client,
    core: client.CoreV1Api,
    pods: PodTimes,
    claims: ClaimTimes,
    namespace: str,
    image: str,
    samples: int,
) -> dict[str, list[float]]:
    """Each step's time since the sample started (session start, or the bare pod's
    create, or its claim's), keyed ``<kind>_<step>``."""
    out: dict[str, list[float]] = {}

    def note(key: str, at: float, started: float) -> None:
        out.setdefault(key, []).append(at - started)

    for i in range(samples):
        # A Helmr session: started, one turn enqueued, until that turn runs.
        started = time.time()
        session, _ = await helmr.actors.start("echo", namespace=namespace, workspace=f"cold-{i}")
        note("helmr_session_started", time.time(), started)
        turn = await session.enqueue(f"cold {i}")
        note("helmr_turn_enqueued", time.time(), started)
        done = await turn.wait(timeout=180)
        assert done.status == "completed", done
        view = await session.retrieve()
        pod = f"{view.name}-runner-{view.process_epoch}"
        events = await all_events(session)
        note("helmr_turn_running", first(events, "turn.running", turn.id), started)
        note("helmr_pod_running", await asyncio.to_thread(pods.wait_running, pod), started)
        note("helmr_pod_created", pods.added[pod], started)
        note("helmr_pod_scheduled", pods.scheduled[pod], started)
        (disk,) = pods.claims[pod]
        note("helmr_claim_bound", await asyncio.to_thread(claims.wait_bound, disk), started)
        node = pods.nodes[pod]
        await session.cancel()
        await no_pods_left(core, namespace, RUNNER_LABEL)
        # Bare pods of the same image on the same node: Python alone, then with the
        # runner's imports (what a runner process does before its first call), then
        # those with a fresh disk as the runner's (its claim created first, as the
        # operator does), then with all of a runner pod's volumes.
        for kind in ("bare", "imports", "disk", "volumes"):
            name = f"{kind}-{i}"
            claim = f"{name}-disk" if kind in ("disk", "volumes") else None
            volume = None
            if claim is not None:
                source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
                volume = client.V1Volume(name="computer", persistent_volume_claim=source)
            pod_body = bare_pod(name, image, node, BARE if kind == "bare" else IMPORTS, volume)
            if kind == "volumes":
                with_runner_volumes(pod_body)
            started = time.time()
            if claim is not None:
                await asyncio.to_thread(
                    core.create_namespaced_persistent_volume_claim,
                    namespace,
                    fresh_claim(claim, DISK_SIZE),
                )
            await asyncio.to_thread(core.create_namespaced_pod, namespace, pod_body)
            running = await asyncio.to_thread(pods.wait_running, name)
            logged = await asyncio.to_thread(log_line_time, core, namespace, name)
            note(f"{kind}_scheduled", pods.scheduled[name], started)
            note(f"{kind}_running", running, started)
            note(f"{kind}_log", logged, started)
            if claim is not None:
                bound = await asyncio.to_thread(claims.wait_bound, claim)
                note(f"{kind}_claim_bound", bound, started)
            await asyncio.to_thread(
                core.delete_namespaced_pod, name, namespace, grace_period_seconds=0
            )
            await no_pods_left(core, namespace, BARE_LABEL)
            if claim is not None:
                await asyncio.to_thread(
                    core.delete_namespaced_persistent_volume_claim, claim, namespace
                )
    return out


# --- setup and main -----------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    prepare(kubeconfig, args.build)
    image = args.image
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)
    table = Table()
    with control_plane(kubeconfig) as op, bench_namespace(core) as namespace:
        create_actor(api, namespace, image)
        create_misbehaving_actor(api, namespace, image)
        pods = PodTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace)
        pods.start()
        claims = ClaimTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace)
        claims.start()
        async with Client(op.url, op.token) as helmr:
            print(f"warm: {args.turns} turns per path ...", flush=True)
            warm = await warm_turns(helmr, api, namespace, args.turns)
            print(f"stop signal: {args.signals} interrupts ...", flush=True)
            signals = await stop_signals(helmr, namespace, args.signals)
            print(f"apiserver: {args.turns} ConfigMaps ...", flush=True)
            apiserver = await asyncio.to_thread(
                configmap_latencies, kubeconfig, namespace, args.turns
            )
            print(f"cold: {args.cold} sessions and {args.cold} bare pods ...", flush=True)
            cold = await cold_starts(helmr, core, pods, claims, namespace, image, args.cold)
        pods.done.set()
        claims.done.set()

    table.section("warm runner: enqueue -> handler start")
    base = table.latency("apiserver: ConfigMap create -> watch event", apiserver)
    rest = table.latency("helmr: REST enqueue -> turn.running", warm["rest_running"])
    table.latency("helmr: REST enqueue -> first turn.output", warm["rest_output"])
    cr = table.latency("helmr: Turn CR create -> turn.running", warm["cr_running"])
    table.ratio("ratio REST enqueue->running / create->watch", rest, base)
    table.ratio("ratio Turn CR->running / create->watch", cr, base)
    table.section("warm runner: stop request -> turn.signal (Turn interrupt)")
    table.latency("helmr: interrupt request -> accepted", signals["accepted"])
    table.latency("helmr: interrupt request -> handler's signal fired", signals["signalled"])
    table.latency(
        "helmr: interrupt accepted -> handler's signal fired", signals["accepted_to_signal"]
    )
    table.section("cold start (same image, same node)")
    bare_run = table.latency("bare pod: create -> Running", cold["bare_running"])
    bare_log = table.latency("bare pod: create -> first log line", cold["bare_log"])
    imports_log = table.latency(
        "bare pod + runner imports: create -> first log line", cold["imports_log"]
    )
    disk_log = table.latency(
        "bare pod + runner imports + fresh PVC: create -> first log line", cold["disk_log"]
    )
    volumes_log = table.latency(
        "bare pod + runner imports + runner's volumes (PVC, token, /tmp): create -> first log line",
        cold["volumes_log"],
    )
    table.latency("helmr: session start -> runner pod created", cold["helmr_pod_created"])
    table.latency("helmr: session start -> runner pod Running", cold["helmr_pod_running"])
    helmr_cold = table.latency(
        "helmr: session start -> first turn.running", cold["helmr_turn_running"]
    )
    table.ratio("ratio helmr first turn.running / bare Running", helmr_cold, bare_run)
    table.ratio("ratio helmr first turn.running / bare first log", helmr_cold, bare_log)
    table.ratio("ratio bare + imports / bare first log", imports_log, bare_log)
    table.ratio("ratio helmr first turn.running / bare + imports", helmr_cold, imports_log)
    table.ratio("ratio helmr first turn.running / bare + imports + PVC", helmr_cold, disk_log)
    table.ratio(
        "ratio helmr first turn.running / bare + imports + runner's volumes",
        helmr_cold,
        volumes_log,
    )
    table.section("cold start step by step: time since the session start or the claim's create")
    for step in ("session_started", "turn_enqueued", "pod_created", "claim_bound"):
        table.latency(f"helmr: {step.replace('_', ' ')}", cold[f"helmr_{step}"])
    table.latency("bare + imports + PVC: claim bound", cold["disk_claim_bound"])
    table.latency("bare + imports + runner's volumes: claim bound", cold["volumes_claim_bound"])
    for step in ("scheduled", "running"):
        table.latency(f"helmr: pod {step}", cold[f"helmr_pod_{step}"])
        table.latency(f"bare + imports + PVC: pod {step}", cold[f"disk_{step}"])
        table.latency(f"bare + imports + runner's volumes: pod {step}", cold[f"volumes_{step}"])
    table.latency("helmr: first turn.running", cold["helmr_turn_running"])
    table.latency("bare + imports + PVC: first log line", cold["disk_log"])
    table.latency("bare + imports + runner's volumes: first log line", cold["volumes_log"])
    print()
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="warm turns per path")
    parser.add_argument("--cold", type=int, default=10, help="cold starts of each kind")
    parser.add_argument("--signals", type=int, default=50, help="interrupts of a busy handler")
    parser.add_argument(
        "--no-build", dest="build", action="store_false", help="reuse the imported runner image"
    )
    parser.add_argument(
        "--image", default=conftest.RUNNER_IMAGE, help="the runner image reference to run"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
