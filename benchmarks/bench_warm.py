"""Warm starts against a real cluster: a suspended Session woken by new work, against
the floor of a bare pod on a claim that is already bound.

Starts a real control plane (``kopf run -m helmr.operator.kopf``, as bench_computer does)
and runs Sessions of the ``files`` test actor (tests/actors/files.py) under an Actor
whose ``idleTimeoutSeconds`` is 1, so a runner with nothing to do ends at once and
its Session is suspended (open, no process, its Workspace's claim kept). Measured, in
one run, one sample at a time on the runner's node, the kinds alternating:

  - wake: a Session's first turn completes, its runner ends idle (the pod is gone
    from the apiserver), then a turn is enqueued → the new runner pod Running → that
    turn's ``turn.running`` (the runner imported the actor and asked for work);
  - bare pod on a bound claim: a claim of the same size bound and mounted once by a
    pod now gone, then a pod of the runner image mounting it is created → Running →
    its first log line (Python started: the least a runner can do before it asks);
    the runner pod created is timed too (what the operator spends before the kubelet);
  - the cold path without a pool: each Session's start → its first ``turn.running``
    (a fresh claim, created and bound on the way);
  - the same after the runner's imports, with the runner's other volumes (its
    projected token, ``/tmp``), and with both: what any runner pod costs the kubelet
    and Python before it can ask for work (bench_session_loop's floor, on a bound
    claim), and which part of that is which.

The ratio Helmr wake → ``turn.running`` / bare pod → first log line is the figure
issue 29 asks for (aim ≤ 1.2x); the other floors say how much of the gap is the pod's.
Every timestamp is this host's wall clock (the control plane and the node run here);
figures are printed, never asserted.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_warm.py [--wakes 5] [--cpu 10m] [--no-build]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _cluster import Cluster, parser, run
from _common import (
    BARE,
    BARE_LABEL,
    RUNNER_CPU,
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
)
from bench_session_loop import IMPORTS, with_runner_volumes
from kubernetes import client
from tests.cluster.sessions import all_events, create_actor

from helmr.client import Client
from helmr.operator.runners.pods import pod_name

FILES = "files"
"""The Actor of tests/actors/files.py."""
DISK = "64Mi"
FLOORS = {
    "bare": (False, False),
    "imports": (True, False),
    "volumes": (False, True),
    "runner": (True, True),
}
"""Pods on a bound claim, by kind: whether they print their line after the runner's
imports, and whether they mount the runner's other volumes (its projected token,
``/tmp``). ``bare`` is the issue's floor; the two between say which part of the gap
to ``runner`` is Python's and which the kubelet's."""
LONG = 300.0


async def helmr_wake(
    helmr: Client, pods: PodTimes, namespace: str, workspace: str
) -> tuple[dict[str, float], str]:
    """A Session started cold (a fresh claim), suspended after its first turn and woken
    by a second; and its node."""
    started = time.time()
    session, _ = await helmr.actors.start(FILES, namespace=namespace, workspace=workspace)
    first_turn = await session.enqueue({"read": []})
    assert (await first_turn.wait(timeout=LONG)).status == "completed"
    cold = first(await all_events(session), "turn.running", first_turn.id) - started
    view = await session.retrieve()
    suspended = pod_name(view.name, view.process_epoch)
    await asyncio.to_thread(pods.wait, pods.gone, suspended, LONG)
    woken = time.time()
    turn = await session.enqueue({"read": []})
    assert (await turn.wait(timeout=LONG)).status == "completed"
    view = await session.retrieve()
    runner = pod_name(view.name, view.process_epoch)
    events = await all_events(session)
    out = {
        "cold_turn_running": cold,
        "wake_pod_created": await asyncio.to_thread(pods.wait, pods.added, runner, LONG) - woken,
        "wake_pod_running": await asyncio.to_thread(pods.wait_running, runner, LONG) - woken,
        "wake_turn_running": first(events, "turn.running", turn.id) - woken,
    }
    await session.cancel()
    await asyncio.to_thread(pods.wait, pods.gone, runner, LONG)
    return out, pods.nodes[runner]


async def bare_on_bound_claim(
    core: client.CoreV1Api,
    pods: PodTimes,
    claims: ClaimTimes,
    namespace: str,
    image: str,
    node: str,
    name: str,
    kind: str,
    cpu: str,
) -> dict[str, float]:
    """A claim bound and once mounted (by a pod now gone), then a pod created on it:
    the line printed at once or after the runner's imports, the runner's other volumes
    mounted or not, by ``kind`` (a key of FLOORS)."""
    claim = f"{name}-disk"
    source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
    volume = client.V1Volume(name="computer", persistent_volume_claim=source)
    await asyncio.to_thread(
        core.create_namespaced_persistent_volume_claim, namespace, fresh_claim(claim, DISK)
    )
    await asyncio.to_thread(claims.wait_bound, claim, LONG)
    before = f"{name}-before"
    await asyncio.to_thread(
        core.create_namespaced_pod, namespace, bare_pod(before, image, node, BARE, volume)
    )
    await asyncio.to_thread(pods.wait_running, before, LONG)
    await asyncio.to_thread(core.delete_namespaced_pod, before, namespace, grace_period_seconds=0)
    await no_pods_left(core, namespace, BARE_LABEL)
    imports, volumes = FLOORS[kind]
    pod = bare_pod(name, image, node, IMPORTS if imports else BARE, volume, cpu)
    if volumes:
        with_runner_volumes(pod)
    started = time.time()
    await asyncio.to_thread(core.create_namespaced_pod, namespace, pod)
    running = await asyncio.to_thread(pods.wait_running, name, LONG)
    logged = await asyncio.to_thread(log_line_time, core, namespace, name)
    await asyncio.to_thread(core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)
    await no_pods_left(core, namespace, BARE_LABEL)
    await asyncio.to_thread(core.delete_namespaced_persistent_volume_claim, claim, namespace)
    return {f"{kind}_running": running - started, f"{kind}_log": logged - started}


async def wakes(
    helmr: Client,
    core: client.CoreV1Api,
    pods: PodTimes,
    claims: ClaimTimes,
    namespace: str,
    image: str,
    samples: int,
    cpu: str,
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for i in range(samples):
        times, node = await helmr_wake(helmr, pods, namespace, f"wake-{i}")
        for kind in FLOORS:
            name = f"{kind}-{i}"
            times |= await bare_on_bound_claim(
                core, pods, claims, namespace, image, node, name, kind, cpu
            )
        for key, value in times.items():
            out.setdefault(key, []).append(value)
    return out


async def bench(args: argparse.Namespace, cluster: Cluster) -> None:
    kubeconfig, api, core, image = cluster.kubeconfig, cluster.api, cluster.core, cluster.image
    with control_plane(kubeconfig) as op, bench_namespace(core) as namespace:
        pods = PodTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace)
        claims = ClaimTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace)
        for follower in (pods, claims):
            follower.start()
        create_actor(
            api,
            namespace,
            image,
            FILES,
            entrypoint="files:files",
            idleTimeoutSeconds=1,
            computer={"size": DISK},
            resources={"limits": {"memory": "128Mi"}, "requests": {"cpu": args.cpu}},
        )
        try:
            async with Client(op.url, op.token) as helmr:
                print(f"wake: {args.wakes} of each ...", flush=True)
                woken = await wakes(
                    helmr, core, pods, claims, namespace, image, args.wakes, args.cpu
                )
        finally:
            for follower in (pods, claims):
                follower.done.set()
    table = Table()
    table.section(
        f"waking a suspended Session (same image, same node, claims of {DISK}, cpu {args.cpu})"
    )
    bare_running = table.latency("bare pod, bound claim: create -> Running", woken["bare_running"])
    bare_log = table.latency("bare pod, bound claim: create -> first log line", woken["bare_log"])
    table.latency("bare pod, bound claim + imports: create -> first log line", woken["imports_log"])
    table.latency(
        "bare pod, bound claim + runner volumes: create -> first log line", woken["volumes_log"]
    )
    runner_log = table.latency(
        "bare pod, bound claim + imports + runner volumes: create -> first log line",
        woken["runner_log"],
    )
    table.latency("helmr: enqueue -> runner pod created", woken["wake_pod_created"])
    wake_running = table.latency("helmr: enqueue -> runner pod Running", woken["wake_pod_running"])
    wake_turn = table.latency("helmr: enqueue -> turn.running", woken["wake_turn_running"])
    table.ratio("ratio helmr pod Running / bare Running", wake_running, bare_running)
    table.ratio("ratio helmr turn.running / bare first log line", wake_turn, bare_log)
    table.ratio("ratio helmr turn.running / bare + imports + volumes", wake_turn, runner_log)
    table.section("the cold path, without a pool (each sample's first turn, on a fresh claim)")
    cold = table.latency("helmr: session start -> first turn.running", woken["cold_turn_running"])
    table.ratio("ratio wake / cold", wake_turn, cold)
    print()
    table.print()


def main() -> None:
    made = parser(__doc__)
    made.add_argument("--wakes", type=int, default=5, help="wakes and bare pods each")
    made.add_argument(
        "--cpu",
        default=RUNNER_CPU,
        help="the CPU every pod asks for, the runners' (their Actor's) and the floors'",
    )
    run(made, bench)


if __name__ == "__main__":
    main()
