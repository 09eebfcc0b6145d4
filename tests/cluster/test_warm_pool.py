"""Warm pools (issue 29, item 1): an Actor's pooled runner pods, kept Running with a
fresh claim each, adopted by new Sessions (their settings delivered at adoption), the
rest starting cold under a burst, rolled on an Actor change, and a pooled pod's token
good for no Session before its adoption and for its adopter's only after."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from helmr.client import Client, SecretKey
from helmr.kube.labels import LABEL_POOL, LABEL_POOLED, LABEL_SESSION_ID
from helmr.protocol import EPOCH_HEADER, routes
from helmr.resources import ACTORS, GROUP, VERSION, WORKSPACES

from .conftest import OWN_PREFIX, Operator, create_namespace, delete_namespace
from .sessions import all_events, create_actor, eventually, pod_token

ACTOR = "settings"
"""tests/actors/settings.py: a turn's result is the SHA-256 of each variable it names."""


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def pool_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    """Every pod made for the Actor's pool, adopted or not."""
    return list(core.list_namespaced_pod(namespace, label_selector=LABEL_POOLED).items)


def pooled(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    """The pool's pods not adopted yet."""
    return [pod for pod in pool_pods(core, namespace) if LABEL_POOL in pod.metadata.labels]


def actor_status(api_client: client.ApiClient, namespace: str) -> dict[str, Any]:
    actor: dict[str, Any] = client.CustomObjectsApi(api_client).get_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, ACTORS, ACTOR
    )
    return actor.get("status") or {}


PoolReady = Callable[..., Awaitable[dict[str, client.V1Pod]]]
"""``await pooled_ready(namespace, **spec)``: the settings Actor with a pool of two
(``spec`` added to its spec), once both pooled pods are ready; those pods by name."""


@pytest.fixture
def pooled_ready(
    api_client: client.ApiClient, core: client.CoreV1Api, runner_image: str
) -> PoolReady:
    async def ready(namespace: str, **spec: Any) -> dict[str, client.V1Pod]:
        create_actor(
            api_client,
            namespace,
            runner_image,
            ACTOR,
            entrypoint="settings:settings",
            warmPool={"size": 2},
            **spec,
        )
        await pool_ready(api_client, namespace, 2)
        return {str(pod.metadata.name): pod for pod in pooled(core, namespace)}

    return ready


async def pool_ready(api_client: client.ApiClient, namespace: str, size: int) -> None:
    def ready() -> bool:
        pool = actor_status(api_client, namespace).get("warmPool") or {}
        return bool(pool.get("ready") == size and pool.get("size") == size)

    await eventually(ready, timeout=180, what=f"{size} pooled pods ready")


def runner_of(core: client.CoreV1Api, namespace: str, session_id: str) -> client.V1Pod:
    [pod] = core.list_namespaced_pod(
        namespace, label_selector=f"{LABEL_SESSION_ID}={session_id}"
    ).items
    return pod


async def storage_call(operator: Operator, session_id: str, epoch: int, token: str) -> int:
    """A runner call that changes nothing but the disk's reported usage: its status."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            operator.url + routes.storage(session_id),
            json={"used_bytes": 0},
            headers={"Authorization": f"Bearer {token}", EPOCH_HEADER: str(epoch)},
        ) as reply,
    ):
        return reply.status


async def test_a_new_session_adopts_a_pooled_pod_with_its_settings_and_the_pool_refills(
    helmr: Client,
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    pooled_ready: PoolReady,
) -> None:
    before = await pooled_ready(namespace, env=[{"name": "REGION", "value": "eu"}])
    assert len(before) == 2
    other, _ = await helmr.actors.start(ACTOR, namespace=namespace, workspace="other")
    other_view = await other.retrieve()
    # Before adoption a pooled pod's token is no Session's runner token.
    token = pod_token(core, namespace, next(iter(before.values())))
    assert await storage_call(operator, other_view.id, 1, token) == 403

    value = f"v-{uuid.uuid4().hex}"
    session, _ = await helmr.actors.start(
        ACTOR, namespace=namespace, workspace="ws", env={"MODEL": value}
    )
    turn = await session.enqueue(["MODEL", "REGION"])
    outcome = await turn.wait(timeout=120)
    assert outcome.status == "completed", outcome
    assert outcome.result == {"MODEL": digest(value), "REGION": digest("eu")}

    view = await session.retrieve()
    runner = runner_of(core, namespace, view.id)
    assert runner.metadata.name in before, "the Session's runner is a pooled pod"
    adopted = before[runner.metadata.name]
    assert runner.metadata.uid == adopted.metadata.uid
    assert [owner.kind for owner in runner.metadata.owner_references] == ["Session"]
    # The pooled claim is the Workspace's disk (its status says so once mirrored),
    # owned by the Workspace.
    custom = client.CustomObjectsApi(api_client)

    def claim_named() -> bool:
        workspace: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, WORKSPACES, "ws"
        )
        return bool((workspace.get("status") or {}).get("claimName") == runner.metadata.name)

    await eventually(claim_named, timeout=30, what="the Workspace's status naming the claim")
    claim = core.read_namespaced_persistent_volume_claim(str(runner.metadata.name), namespace)
    assert [owner.kind for owner in claim.metadata.owner_references] == ["Workspace"]
    # Its token is its own Session's process's, and no other Session's.
    token = pod_token(core, namespace, runner)
    assert await storage_call(operator, view.id, view.process_epoch, token) == 200
    assert await storage_call(operator, other_view.id, 1, token) == 403
    # The value is in no manifest of a pod.
    assert all(
        value not in json.dumps(pod.to_dict(), default=str) for pod in pool_pods(core, namespace)
    )

    # The pool refills to its size with a new pod.
    await pool_ready(api_client, namespace, 2)
    assert runner.metadata.name not in {pod.metadata.name for pod in pooled(core, namespace)}


async def test_a_burst_adopts_each_pooled_pod_once_and_the_rest_start_cold(
    helmr: Client, core: client.CoreV1Api, namespace: str, pooled_ready: PoolReady
) -> None:
    pooled_names = set(await pooled_ready(namespace))

    async def one(n: int) -> tuple[str, str]:
        session, _ = await helmr.actors.start(ACTOR, namespace=namespace, workspace=f"ws-{n}")
        outcome = await (await session.enqueue(["HOME"])).wait(timeout=180)
        assert outcome.status == "completed", outcome
        view = await session.retrieve()
        return view.id, str(runner_of(core, namespace, view.id).metadata.name)

    started = await asyncio.gather(*(one(n) for n in range(5)))
    runners = [runner for _, runner in started]
    assert len(set(runners)) == 5, runners  # no pod runs two Sessions
    assert len(set(runners) & pooled_names) == 2, (runners, pooled_names)
    for session_id, runner in started:
        labelled = core.read_namespaced_pod(runner, namespace).metadata.labels
        assert labelled[LABEL_SESSION_ID] == session_id


async def test_an_actor_change_replaces_the_pooled_pods_never_an_adopted_one(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    pooled_ready: PoolReady,
) -> None:
    await pooled_ready(namespace)
    session, _ = await helmr.actors.start(ACTOR, namespace=namespace, workspace="ws")
    assert (await (await session.enqueue(["A"])).wait(timeout=120)).status == "completed"
    view = await session.retrieve()
    adopted = runner_of(core, namespace, view.id)
    await pool_ready(api_client, namespace, 2)
    old = {pod.metadata.name for pod in pooled(core, namespace)}

    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, ACTORS, ACTOR, {"spec": {"env": [{"name": "A", "value": "2"}]}}
    )

    def rolled() -> bool:
        now = {
            pod.metadata.name
            for pod in pooled(core, namespace)
            if not pod.metadata.deletion_timestamp
        }
        return len(now) == 2 and not now & old

    await eventually(rolled, timeout=120, what="the pool rolled")
    await pool_ready(api_client, namespace, 2)
    still = core.read_namespaced_pod(str(adopted.metadata.name), namespace)
    assert still.metadata.uid == adopted.metadata.uid
    assert still.metadata.deletion_timestamp is None
    # The adopted pod still runs its Session's turns; a new Session gets the new env.
    assert (await (await session.enqueue(["A"])).wait(timeout=120)).result == {"A": None}
    fresh, _ = await helmr.actors.start(ACTOR, namespace=namespace, workspace="ws-2")
    assert (await (await fresh.enqueue(["A"])).wait(timeout=120)).result == {"A": digest("2")}


async def test_the_operator_sigkilled_during_adoptions_adopts_no_pod_twice_and_leaves_none_waiting(
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    pooled_ready: PoolReady,
) -> None:
    await pooled_ready(namespace)
    rng = random.Random()
    refs = []
    try:
        for kill in range(2):
            async with Client(operator.url, operator.token) as helmr:
                for n in range(2):
                    session, _ = await helmr.actors.start(
                        ACTOR, namespace=namespace, workspace=f"ws-{kill}-{n}"
                    )
                    refs.append((session.id, await session.enqueue(["HOME"])))
            await asyncio.sleep(rng.uniform(0.0, 0.5))  # amid the adoptions
            operator.kill()
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            operator.start()
            await pool_ready(api_client, namespace, 2)
    finally:
        if operator.process is None or operator.process.poll() is not None:
            operator.start()  # leave the shared operator running for the next test
    async with Client(operator.url, operator.token) as helmr:
        for session_id, turn in refs:
            ref = helmr.sessions.ref(session_id).turn(turn.id)
            outcome = await ref.wait(timeout=180)
            assert outcome.status == "completed", outcome
    runners = [runner_of(core, namespace, session_id) for session_id, _ in refs]
    assert len({pod.metadata.uid for pod in runners}) == len(refs)
    # Every pod taken from the pool runs exactly one of these Sessions.
    taken = [pod for pod in pool_pods(core, namespace) if LABEL_SESSION_ID in pod.metadata.labels]
    assert {pod.metadata.labels[LABEL_SESSION_ID] for pod in taken} <= {sid for sid, _ in refs}
    assert len(taken) == len({pod.metadata.labels[LABEL_SESSION_ID] for pod in taken})


async def test_a_secrets_value_reaches_a_pooled_runner_at_adoption_and_nothing_else(
    kubeconfig: str,
    crds: None,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    pooled_ready: PoolReady,
    tmp_path: Path,
) -> None:
    """An operator serving its namespaces by name (the chart's watchNamespaces, whose
    Role there may get Secrets) delivers a Session's Secret keys to a pooled runner
    when it is adopted: the pod's manifest names no Secret, and the value is in no
    log, timeline, Event or status."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    operator = Operator.for_cluster(kubeconfig, tmp_path, HELMR_WATCH_NAMESPACES=namespace)
    secret = f"s3cret-{uuid.uuid4().hex}"
    body = client.V1Secret(metadata=client.V1ObjectMeta(name="llm"), string_data={"k": secret})
    core.create_namespaced_secret(namespace, body)
    try:
        operator.start(namespaces=namespace)
        before = set(await pooled_ready(namespace))
        log_start = operator.log.stat().st_size
        async with Client(operator.url, operator.token) as helmr:
            session, _ = await helmr.actors.start(
                ACTOR,
                namespace=namespace,
                workspace="ws",
                env={"KEY": SecretKey(secret="llm", key="k")},
            )
            outcome = await (await session.enqueue(["KEY"])).wait(timeout=120)
            assert outcome.status == "completed", outcome
            assert outcome.result == {"KEY": digest(secret)}
            view = await session.retrieve()
            events = await all_events(session)
        runner = runner_of(core, namespace, view.id)
        assert runner.metadata.name in before, "the Session's runner is a pooled pod"
        custom = client.CustomObjectsApi(api_client)
        seen = [
            json.dumps([event.model_dump(mode="json") for event in events]),
            json.dumps(view.model_dump(mode="json")),
            *(
                json.dumps(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural))
                for plural in ("sessions", "turns", "workspaces", ACTORS)
            ),
            json.dumps(core.list_namespaced_event(namespace).to_dict(), default=str),
            *(json.dumps(pod.to_dict(), default=str) for pod in pool_pods(core, namespace)),
        ]
        with operator.log.open("rb") as log:
            log.seek(log_start)
            seen.append(log.read().decode(errors="replace"))
        for text in seen:
            assert secret not in text
    finally:
        operator.stop()
        delete_namespace(core, namespace)
