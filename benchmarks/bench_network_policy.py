"""What the runner network policies cost a cold start, against a real cluster
whose NetworkPolicy engine enforces them (the local cluster's kube-router).

Two control planes run side by side (``kopf run -m helmr.operator.kopf``, as the
cluster tests start one), each serving a namespace of its own: one with its
default settings, so runner pods are contained (``helmr-runners`` and
``helmr-runners-<actor>``: default-deny but DNS and the runner API), one with
``HELMR_RUNNER_NETWORK_POLICY=false``, so it writes no policy and its namespace
has none. Sessions of the echo actor, ``contained`` and ``open``, each on a
fresh Workspace (so a fresh PVC), start one at a time, the two kinds taking
turns (and which goes first alternating) so they share the node's load.
Each is measured from ``actors.start`` to its runner pod ``Running``, its
first ``turn.running`` and that turn's ``turn.completed`` (the runner has
called the runner API through the policy by then). The ratios contained /
open in one run are the figures: timings on a shared machine are noisy, a
ratio in one run is less so.

With ``--compare proxy``, both control planes write the policies, and the
first is told an egress proxy (``HELMR_EGRESS_PROXY_URL``) and serves an echo
Actor naming a host (``spec.network.egressHosts``): its runner pods get the
proxy's variables and its policy the proxy's port; the second's Actor names
none. The echo actor never calls out, so the proxy is not contacted (none runs):
this is what the proxy's configuration costs a cold start.

Every timestamp is this host's wall clock (the control planes and the node run
here). Figures are printed, never asserted; only the policies' presence (and
absence) in each namespace is checked.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_network_policy.py [--cold 10] [--no-build] \\
        [--compare policies|proxy]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (
    RUNNER_LABEL,
    PodTimes,
    Table,
    bench_namespace,
    control_plane,
    first,
    new_api_client,
    no_pods_left,
    prepare,
)
from kubernetes import client
from tests.cluster import conftest
from tests.cluster.sessions import all_events, create_actor

from helmr.client import Client
from helmr.operator.runners.pods import pod_name

Plane = tuple[dict[str, str], dict[str, Any]]
"""A control plane's settings beyond the defaults, and its echo Actor's spec beyond
the defaults."""
OWN_POLICIES = ["helmr-runners", "helmr-runners-echo"]
COMPARISONS: dict[str, tuple[dict[str, Plane], dict[str, list[str]]]] = {
    # Each: the two planes (the first measured against the second), and the
    # NetworkPolicies each one's namespace is to hold.
    "policies": (
        {"contained": ({}, {}), "open": ({"HELMR_RUNNER_NETWORK_POLICY": "false"}, {})},
        {"contained": OWN_POLICIES, "open": []},
    ),
    "proxy": (
        {
            "proxied": (
                {"HELMR_EGRESS_PROXY_URL": "http://10.96.0.99:3128"},
                {"network": {"egressHosts": [{"host": "api.example.com"}]}},
            ),
            "direct": ({}, {}),
        },
        {"proxied": OWN_POLICIES, "direct": OWN_POLICIES},
    ),
}
STEPS = ("pod_running", "turn_running", "turn_completed")


async def cold_start(
    helmr: Client, core: client.CoreV1Api, pods: PodTimes, namespace: str, i: int
) -> dict[str, float]:
    """A session on a fresh Workspace, one turn enqueued, until it completes: each
    step's seconds since the start."""
    started = time.time()
    session, _ = await helmr.actors.start("echo", namespace=namespace, workspace=f"cold-{i}")
    turn = await session.enqueue("cold")
    done = await turn.wait(timeout=180)
    assert done.status == "completed", done
    view = await session.retrieve()
    events = await all_events(session)
    runner = pod_name(view.name, view.process_epoch)
    out = {
        "pod_running": await asyncio.to_thread(pods.wait_running, runner),
        "turn_running": first(events, "turn.running", turn.id),
        "turn_completed": first(events, "turn.completed", turn.id),
    }
    await session.cancel()
    await no_pods_left(core, namespace, RUNNER_LABEL)
    return {step: at - started for step, at in out.items()}


def policies(api: client.ApiClient, namespace: str) -> list[str]:
    listed = client.NetworkingV1Api(api).list_namespaced_network_policy(namespace)
    return sorted(str(p.metadata.name) for p in listed.items)  # type: ignore[union-attr]


async def bench(args: argparse.Namespace) -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    prepare(kubeconfig, args.build)
    api = new_api_client(kubeconfig)
    core = client.CoreV1Api(api)
    kinds, expected = COMPARISONS[args.compare]
    times: dict[str, dict[str, list[float]]] = {kind: {s: [] for s in STEPS} for kind in kinds}
    with ExitStack() as stack:
        namespaces = {kind: stack.enter_context(bench_namespace(core)) for kind in kinds}
        planes = {
            kind: stack.enter_context(control_plane(kubeconfig, namespaces[kind], **settings))
            for kind, (settings, _) in kinds.items()
        }
        pods = {}
        for kind, namespace in namespaces.items():
            create_actor(api, namespace, conftest.RUNNER_IMAGE, **kinds[kind][1])
            pods[kind] = PodTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace)
            pods[kind].start()
            stack.callback(pods[kind].done.set)
        helmrs = {kind: Client(op.url, op.token) for kind, op in planes.items()}
        try:
            print(f"cold: {args.cold} sessions of each kind ...", flush=True)
            for i in range(args.cold):
                for kind in list(kinds) if i % 2 == 0 else reversed(kinds):
                    sample = await cold_start(helmrs[kind], core, pods[kind], namespaces[kind], i)
                    for step, seconds in sample.items():
                        times[kind][step].append(seconds)
        finally:
            for helmr in helmrs.values():
                await helmr.aclose()
        seen = {kind: policies(api, namespace) for kind, namespace in namespaces.items()}
    print(f"NetworkPolicies: {seen}")
    assert seen == expected, seen

    table = Table()
    table.section("cold start: session start -> each step")
    measured, against = kinds
    for step in STEPS:
        label = step.replace("_", " ")
        one = table.latency(f"{measured}: {label}", times[measured][step])
        other = table.latency(f"{against}: {label}", times[against][step])
        table.ratio(f"ratio {measured} / {against}, {label}", one, other)
    print()
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", type=int, default=10, help="cold starts of each kind")
    parser.add_argument(
        "--compare",
        choices=sorted(COMPARISONS),
        default="policies",
        help="policies: contained against open; proxy: with the egress proxy settings or not",
    )
    parser.add_argument(
        "--no-build", dest="build", action="store_false", help="reuse the imported runner image"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
