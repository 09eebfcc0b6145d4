"""``bench_scale.py writes``: apiserver writes per API-enqueued Turn in steady state,
counted by the apiserver itself.

A real control plane (``kopf run -m helmr.operator.kopf`` on this host) and real runner
pods of the echo actor: N sessions are started and warmed (one Turn each), then
``apiserver_request_total`` is read from the apiserver's ``/metrics``, each
session runs ``--turns`` Turns one after another through the public client,
every Workspace's saves are waited for (none pending: they are taken after the
Turns), the status mirror is given time for its last pass, and the counter is read
again.
Counted: write verbs (POST, PUT, PATCH, DELETE, APPLY) on Helmr's resources, core
Events, pods, service accounts and VolumeSnapshots (each completed Turn asks for a
save of its Computer disk). Other clients of a shared cluster (another test run's
operator, kubelets) write to the same resources: the same counts over an idle
window as long as the run (its saves included), right after it, are shown too and
subtracted. Run with
the chart's default (``apiTurnResources: true``) and with it off, each on a new
control plane.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import Table, bench_namespace, prepare
from _recovery_points import RecoveryPoints
from kubernetes import client, config
from tests.cluster import conftest
from tests.cluster.sessions import create_actor

from helmr.client import Client, SessionRef

WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
CORE_RESOURCES = {"events", "pods", "serviceaccounts"}
COUNTED_GROUPS = {"helmr.dev", "snapshot.storage.k8s.io"}
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
# The status mirror's interval (0.5 s by default) and a pass's own time, and the
# snapshot machinery's last writes (a pruned save's deletion) after the last save.
SETTLE_SECONDS = 3.0
SAVES_TIMEOUT = 600.0


def helmr_writes(kubeconfig: str) -> Counter[str]:
    """The apiserver's count of write requests to what Helmr writes, by verb and
    resource (namespace deletions' collection deletes left out)."""
    raw = conftest.kubectl(kubeconfig, "get", "--raw", "/metrics")
    if raw.returncode != 0:
        raise SystemExit(raw.stderr)
    counts: Counter[str] = Counter()
    for line in raw.stdout.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        verb = labels.get("verb")
        # A namespace's deletion deletes its collections: not a write of Helmr's.
        if verb not in WRITE_VERBS or (verb == "DELETE" and labels.get("scope") == "namespace"):
            continue
        group, resource = labels.get("group", ""), labels.get("resource", "")
        if group not in COUNTED_GROUPS and not (group == "" and resource in CORE_RESOURCES):
            continue
        sub = labels.get("subresource")
        counts[f"{verb} {resource}{'/' + sub if sub else ''}"] += int(float(sample["value"]))
    return counts


def write_rows(table: Table, run: Counter[str], idle: Counter[str]) -> None:
    """The writes of a run and of its idle window, a row per verb and resource."""
    table.rows.append(("  by verb and resource: run / idle window", "", "", "", ""))
    for what in sorted(run | idle):
        table.rows.append((f"    {what}", f"{run[what]}/{idle[what]}", "", "", ""))


async def _session_turns(session: SessionRef, turns: int, pace: float = 0.0) -> None:
    """``turns`` Turns one after another, each begun ``pace`` seconds after the one
    before at the soonest (0: at once)."""
    began = time.monotonic()
    for n in range(turns):
        ref = await session.enqueue({"n": n})
        await ref.wait(timeout=120)
        await asyncio.sleep(max(began + (n + 1) * pace - time.monotonic(), 0.0))


async def _saves_settled(helmr: Client, namespace: str, workspaces: int) -> None:
    """Until no Workspace has a pending save: the Computer saves of the Turns run are
    taken after them (one at a time per Workspace), so their writes come later."""
    refs = [helmr.workspaces.ref(f"{namespace}/ws-{i}") for i in range(workspaces)]
    deadline = time.monotonic() + SAVES_TIMEOUT
    while any([(await ref.retrieve()).pending_saves for ref in refs]):
        if time.monotonic() > deadline:
            raise SystemExit(f"saves still pending after {SAVES_TIMEOUT} s")
        await asyncio.sleep(0.5)


async def one_run(
    kubeconfig: str,
    api: client.ApiClient,
    sessions: int,
    turns: int,
    api_turn_resources: bool,
    pace: float = 0.0,
    save_interval: int = 0,
) -> Run:
    core = client.CoreV1Api(api)
    data = Path(tempfile.mkdtemp(prefix="helmr-bench-"))
    op = conftest.Operator.for_cluster(
        kubeconfig, data, HELMR_API_TURN_RESOURCES=str(api_turn_resources).lower()
    )
    op.start()
    try:
        with bench_namespace(core) as namespace:
            actor = create_actor(
                api,
                namespace,
                conftest.RUNNER_IMAGE,
                computer={"saveIntervalSeconds": save_interval},
            )
            async with Client(op.url, op.token) as helmr:
                started = [
                    (await helmr.actors.start(actor, namespace=namespace, workspace=f"ws-{i}"))[0]
                    for i in range(sessions)
                ]
                await asyncio.gather(*(_session_turns(s, 1) for s in started))  # warm
                await _saves_settled(helmr, namespace, sessions)
                await asyncio.sleep(SETTLE_SECONDS)
                before = helmr_writes(kubeconfig)
                began = time.monotonic()
                async with RecoveryPoints(op.url) as points:
                    await asyncio.gather(*(_session_turns(s, turns, pace) for s in started))
                    took = time.monotonic() - began
                    await _saves_settled(helmr, namespace, sessions)
                await asyncio.sleep(SETTLE_SECONDS)
                after = helmr_writes(kubeconfig)
                window = time.monotonic() - began
                await asyncio.sleep(window)  # the idle window
                idle = helmr_writes(kubeconfig) - after
                for session in started:
                    await session.cancel()
    finally:
        op.stop()
    writes = after - before
    return Run(sessions * turns, took, writes, idle, points)


SNAPSHOT_RESOURCES = {"volumesnapshots", "volumesnapshotcontents"}


def saves_machinery(what: str) -> bool:
    """Whether a ``VERB resource[/subresource]`` count is the saves' machinery's: their
    snapshots (ours, and the snapshot controller's and CSI snapshotter's contents and
    statuses) and the Workspace statuses that show them. (The snapshot controller's
    Events are among the core Events, not told apart here.)"""
    resource = what.split(" ", 1)[1]
    return resource.split("/")[0] in SNAPSHOT_RESOURCES or resource == "workspaces/status"


@dataclass(frozen=True)
class Run:
    turns: int
    seconds: float
    writes: Counter[str]
    idle: Counter[str]
    """The same counts over as long a window with no Turns: other clients' writes."""
    points: RecoveryPoints

    def per_turn(self, only: Callable[[str], bool] = lambda what: True) -> float:
        """Writes per Turn, the idle window's subtracted; ``only`` those it selects."""
        run = sum(n for what, n in self.writes.items() if only(what))
        noise = sum(n for what, n in self.idle.items() if only(what))
        return max(run - noise, 0) / self.turns


async def writes_bench(args: argparse.Namespace) -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    prepare(kubeconfig, args.build)
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    runs = [
        (int(n), resources == "true", int(interval))
        for n in args.sessions.split(",")
        for resources in args.api_turn_resources.split(",")
        for interval in args.save_intervals.split(",")
    ]
    for sessions, resources, interval in runs:
        label = (
            f"{sessions} sessions x {args.turns} warm turns, apiTurnResources={resources},"
            f" saveIntervalSeconds={interval}" + (f", a turn per {args.pace}s" if args.pace else "")
        )
        print(f"{label} ...", flush=True)
        run = await one_run(kubeconfig, api, sessions, args.turns, resources, args.pace, interval)
        # Each run's table as it ends: a run cut short by a timeout keeps the ones before.
        table = Table()
        table.section(label)
        raw = sum(run.writes.values()) / run.turns
        table.rows.append(
            (
                "  apiserver writes per turn, idle subtracted",
                f"{run.per_turn():.2f}",
                "",
                "",
                "",
            )
        )
        table.rows.append(("  apiserver writes per turn, raw", f"{raw:.2f}", "", "", ""))
        saves = run.per_turn(saves_machinery)
        table.rows.append(("  of which the saves' machinery, per turn", f"{saves:.2f}", "", "", ""))
        table.rows.append(
            ("  of which the rest, per turn", f"{run.per_turn() - saves:.2f}", "", "", "")
        )
        run.points.rows(table)
        table.rows.append(
            ("  turns/s (real echo runners)", f"{run.turns / run.seconds:.1f}", "", "", "")
        )
        write_rows(table, run.writes, run.idle)
        table.print()
