"""Many Turns, admitted both ways at once, each run exactly once and mirrored.

Turns applied with kubectl (the operator's ``turn_admit``) and enqueued
through the API are interleaved across many sessions, in bursts with pauses,
so that some arrive while a runner is busy and some while it idles in its
``receive`` long poll. Meanwhile other namespaces, each with a session
running a long Turn, are deleted, as in a full test run where earlier tests'
namespaces terminate: the apiserver then refuses their Events and Secrets
(403 NamespaceTerminating), which once failed whole status-sync passes and
dropped the other sessions' changes with them (issue 9, item 7a).

Every Turn must show in its session's timeline exactly one ``turn.running``
and exactly one terminal event, ``turn.completed``, and every Turn resource
must end with phase ``completed``: a status left behind (a dropped change, or
a ``queued`` status written after the status sync's newer one) fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from typing import Any

from kubernetes import client

from helmr.client import Client, SessionRef
from helmr.resources import API_VERSION, GROUP, TURNS, VERSION

from .conftest import create_namespace, delete_namespace, kubectl
from .sessions import all_events, create_actor, eventually, operator_watches

SESSIONS = 20
TURNS_PER_SESSION = 50  # 1,000 turns in all, half of them applied with kubectl
TERMINAL = ("turn.completed", "turn.failed", "turn.interrupted", "turn.cancelled")
DOOMED_AT = (10, 25, 40, TURNS_PER_SESSION - 1)
"""The rounds after which one more namespace with a running session is deleted."""


def _turn_manifest(namespace: str, session_name: str, cr_name: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Turn",
        "metadata": {"name": cr_name, "namespace": namespace},
        "spec": {"sessionRef": {"name": session_name}, "input": {"from": "kubectl", "tag": tag}},
    }


async def _apply(kubeconfig: str, manifests: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    applied = await asyncio.to_thread(kubectl, kubeconfig, "apply", "-f", "-", input=body)
    assert applied.returncode == 0, applied.stderr


async def _doomed_namespace(
    core: client.CoreV1Api, api_client: client.ApiClient, helmr: Client, image: str
) -> str:
    """A namespace whose session runs a long Turn (about 100 s of output) when deleted."""
    namespace = create_namespace(core)
    create_actor(api_client, namespace, image)
    session, _ = await helmr.actors.start("echo", namespace=namespace, workspace="ws")
    await session.enqueue(" ".join(["word"] * 2000))
    return namespace


async def _settled(session: SessionRef) -> bool:
    events = await all_events(session)
    return sum(e.kind in TERMINAL for e in events) >= TURNS_PER_SESSION


async def test_a_thousand_turns_from_kubectl_and_the_api_each_run_exactly_once(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    doomed = [await _doomed_namespace(core, api_client, helmr, runner_image) for _ in DOOMED_AT]
    try:
        await _stress(helmr, api_client, kubeconfig, namespace, runner_image, core, doomed)
    finally:
        for name in doomed:
            with contextlib.suppress(client.ApiException):  # deleted already
                delete_namespace(core, name)


async def _stress(
    helmr: Client,
    api_client: client.ApiClient,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
    core: client.CoreV1Api,
    doomed: list[str],
) -> None:
    await operator_watches(api_client, namespace, create_actor(api_client, namespace, runner_image))
    custom = client.CustomObjectsApi(api_client)
    started = [
        (await helmr.actors.start("echo", namespace=namespace, workspace=f"ws-{i}"))[0]
        for i in range(SESSIONS)
    ]
    names = {s.id: (await s.retrieve()).name for s in started}
    rng = random.Random(9)  # reproducible bursts and pauses
    api_turns: set[str] = set()
    kubectl_tags: dict[str, str] = {}  # Turn resource name -> session id

    # Each round: every session gets one Turn, from kubectl or the API at random,
    # the kubectl ones in one apply running while the API enqueues are sent.
    for round_ in range(TURNS_PER_SESSION):
        manifests = []
        enqueues = []
        for session in started:
            tag = f"{round_}-{session.id}"
            if rng.random() < 0.5:
                cr_name = f"k-{round_}-{names[session.id]}"
                kubectl_tags[cr_name] = session.id
                manifests.append(_turn_manifest(namespace, names[session.id], cr_name, tag))
            else:
                enqueues.append(session.enqueue({"from": "api", "tag": tag}))
        applying = _apply(kubeconfig, manifests) if manifests else asyncio.sleep(0)
        _, *refs = await asyncio.gather(applying, *enqueues)
        api_turns |= {ref.id for ref in refs}
        if round_ in DOOMED_AT:
            delete_namespace(core, doomed.pop())
        # Some rounds follow at once (runners busy), some after the runners went idle.
        await asyncio.sleep(rng.choice((0.0, 0.0, 0.5, 2.0)))

    deadline = time.monotonic() + 300
    pending = list(started)
    while pending and time.monotonic() < deadline:
        done = await asyncio.gather(*(_settled(s) for s in pending))
        pending = [s for s, ok in zip(pending, done, strict=True) if not ok]
        if pending:
            await asyncio.sleep(2)

    # The timeline: each Turn queued once, running once, completed once.
    problems: list[str] = []
    all_turns: set[str] = set()
    for session in started:
        events = await all_events(session)
        queued = [e.turn_id for e in events if e.kind == "turn.queued"]
        running = Counter(e.turn_id for e in events if e.kind == "turn.running")
        ended = Counter(e.turn_id for e in events if e.kind in TERMINAL)
        completed = {e.turn_id for e in events if e.kind == "turn.completed"}
        if len(queued) != TURNS_PER_SESSION or len(set(queued)) != len(queued):
            problems.append(f"session {session.id}: {len(queued)} turn.queued events")
        for turn_id in queued:
            if running[turn_id] != 1 or ended[turn_id] != 1 or turn_id not in completed:
                status = (await session.turn(turn_id).retrieve()).status if turn_id else None
                problems.append(
                    f"session {session.id} turn {turn_id}: running x{running[turn_id]},"
                    f" terminal x{ended[turn_id]}, status {status}"
                )
        all_turns |= {t for t in queued if t is not None}
    assert not problems, "\n".join(problems[:40])
    assert len(all_turns) == SESSIONS * TURNS_PER_SESSION
    assert api_turns <= all_turns

    # The Turn resources: every one ends completed, with its own input echoed.
    def resources() -> list[dict[str, Any]]:
        listed: dict[str, Any] = custom.list_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, TURNS
        )
        return list(listed["items"])

    def unfinished() -> list[str]:
        return [
            f"{cr['metadata']['name']}: {(cr.get('status') or {}).get('phase')}"
            for cr in resources()
            if (cr.get("status") or {}).get("phase") != "completed"
        ]

    with contextlib.suppress(AssertionError):  # what is left is reported below
        await eventually(lambda: not unfinished(), timeout=60, what="the Turn resources")
    left = unfinished()
    assert not left, f"{len(left)} Turn resources not completed: {left[:20]}"
    crs = resources()
    assert len(crs) == SESSIONS * TURNS_PER_SESSION
    by_name = {cr["metadata"]["name"]: cr for cr in crs}
    for cr_name, session_id in kubectl_tags.items():
        status = by_name[cr_name]["status"]
        assert status["turnId"] in all_turns
        assert status["result"] == {"echo": by_name[cr_name]["spec"]["input"]}, cr_name
        assert by_name[cr_name]["spec"]["input"]["tag"].endswith(session_id)
