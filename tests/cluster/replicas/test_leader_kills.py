"""Two control-plane replicas on PostgreSQL, installed with helm (issue 11, item 4).

The chart runs 2 replicas on a PostgreSQL server of this host (release.py). The
leader (the Lease's holder) is killed while a
Turn runs, five times, alternately: its process SIGKILLed on this node (a
crash: nothing releases the Lease, which must expire; the container restarts
as a candidate) and its pod deleted without grace (the process stops on
SIGTERM and releases the Lease). Each time: no Turn is
lost (every one completes, with its result), none runs twice (one
``turn.running`` each), never more than one runner pod for the session at any
moment (watched), and the API, asked every 200 ms through the apiserver's
Service proxy, answers throughout from the other replica: Helmr never answers
5xx without Retry-After. The proxy itself may fail a request
routed to the killed pod before its endpoint is gone (it tells no Retry-After
either); those are counted apart and must stay brief.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from kubernetes import client

from helmr.client import Client
from helmr.protocol import api_routes

from ..pods import PodHistory
from ..sessions import all_events, create_misbehaving_actor, eventually, operator_watches
from .clients import Probe, eventually_async, helmr_retrying, turn_status
from .release import LEASE_SECONDS, Release, lease_holder, ready_control_planes

pytestmark = pytest.mark.helm

KILLS = 5
TURN_SECONDS = 6.0
# Longest run of failed proxy requests allowed (the killed pod's endpoint being removed).
PROXY_GAP = 3.0


def crash(core: client.CoreV1Api, namespace: str, pod_name: str) -> None:
    """SIGKILLs the pod's control-plane process: the node is this machine."""
    uid = core.read_namespaced_pod(pod_name, namespace).metadata.uid
    killed = 0
    for entry in Path("/proc").iterdir():
        try:
            cgroups = (entry / "cgroup").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # not a process, or gone
        if f"pod{uid}/" in cgroups and b"kopf" in command:
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    assert killed == 1, f"{killed} control-plane processes found in pod {pod_name}"


async def test_killing_the_leader_mid_turn_loses_no_turn_and_the_api_answers(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    release: Release,
    runner_image: str,
    helmr: Client,
) -> None:
    actor = create_misbehaving_actor(api_client, release.namespace, runner_image)
    await operator_watches(api_client, release.namespace, actor)
    history = PodHistory(release.namespace, kubeconfig)
    history.start()
    session, _ = await helmr.actors.start(actor, namespace=release.namespace, workspace="ws")
    probe = Probe(release, api_routes.session(session.id))
    probing = asyncio.create_task(probe.run())
    turns = []
    leaders = []
    handovers = []
    try:
        for kill in range(KILLS):
            await eventually(
                lambda: len(ready_control_planes(core, release)) == 2,
                timeout=180,
                what="both replicas ready",
            )
            turn = await helmr_retrying(
                lambda k=kill: session.enqueue({"sleep": TURN_SECONDS, "n": k})
            )
            turns.append(turn)
            await eventually_async(
                lambda t=turn: turn_status(t, "running"), timeout=120, what=f"turn {kill} running"
            )
            leader = lease_holder(api_client, release)
            leaders.append(leader)
            pod = leader.rpartition("_")[0]
            if kill % 2 == 0:
                crash(core, release.namespace, pod)
            else:
                core.delete_namespaced_pod(pod, release.namespace, grace_period_seconds=0)
            killed = time.monotonic()
            await eventually(
                lambda gone=leader: lease_holder(api_client, release) not in ("", gone),
                timeout=LEASE_SECONDS * 3,
                what=f"a new leader after killing {leader}",
            )
            handovers.append(time.monotonic() - killed)
        results = [await helmr_retrying(lambda t=t: t.wait(timeout=120)) for t in turns]
    finally:
        probing.cancel()
        history.stop()
    # What it measured, for the record (pytest -s shows it).
    print(
        f"handovers (kill -> new Lease holder seen, s): {[round(h, 1) for h in handovers]}; "
        f"probes: {probe.answers}, longest unanswered run {probe.longest_gap:.1f} s"
    )
    assert len(set(leaders)) == KILLS, leaders
    # Within the Lease duration of the last renewal, plus a retry and scheduling slack.
    assert max(handovers) < LEASE_SECONDS + 3, handovers
    # After a crash the Lease had to expire: nobody took over early.
    assert min(handovers[0::2]) > LEASE_SECONDS - 1.5, handovers
    assert [r.status for r in results] == ["completed"] * KILLS, results
    assert [r.result for r in results] == [
        {"echo": {"sleep": TURN_SECONDS, "n": n}} for n in range(KILLS)
    ]
    events = await all_events(session)
    running = [str(e.turn_id) for e in events if e.kind == "turn.running"]
    assert sorted(running) == sorted(t.id for t in turns), running  # each ran once
    assert max(history.counts) == 1, history.counts  # one runner pod, never two
    assert not probe.answers.helmr_5xx, probe.answers.helmr_5xx
    assert probe.longest_gap < PROXY_GAP, (probe.longest_gap, probe.answers.proxy_failures)
    assert probe.answers.ok > 0
