"""A Session's own settings reach its actor (issue 29, item 2): values, a Secret's key
and a whole Secret, named at start; a Secret's value appears nowhere else (the control
plane's log, the timeline, Events, the statuses of the Session, its Turns and its
Workspace, the runner pod's manifest); and a kubectl Session's, from its manifest."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from kubernetes import client
from pydantic import JsonValue

from helmr.client import Client, SecretKey, SecretSource
from helmr.resources import GROUP, VERSION

from .conftest import Operator, kubectl_apply
from .sessions import (
    all_events,
    create_actor,
    operator_watches,
    runner_pods,
    turn_resource_settled,
)

ACTOR = "settings"
"""The Actor of tests/actors/settings.py: the SHA-256 of each variable named."""


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def dumped(obj: Any) -> str:
    return json.dumps(obj.to_dict(), default=str)


async def test_a_secrets_value_reaches_the_actor_and_nothing_else(
    helmr: Client,
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    secret, team = f"s3cret-{uuid.uuid4().hex}", f"t3am-{uuid.uuid4().hex}"
    for name, data in (("llm", {"api-key": secret}), ("team", {"TOKEN": team})):
        body = client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data=data)
        core.create_namespaced_secret(namespace, body)
    create_actor(
        api_client,
        namespace,
        runner_image,
        ACTOR,
        entrypoint="settings:settings",
        env=[{"name": "MODEL", "value": "from-actor"}, {"name": "REGION", "value": "eu"}],
    )
    log_start = operator.log.stat().st_size
    session, _ = await helmr.actors.start(
        ACTOR,
        namespace=namespace,
        workspace="ws",
        env={"MODEL": "small", "LLM_API_KEY": SecretKey(secret="llm", key="api-key")},
        env_from=[SecretSource(secret="team", prefix="T_")],
    )
    names: list[JsonValue] = ["MODEL", "REGION", "LLM_API_KEY", "T_TOKEN", "UNSET"]
    turn = await session.enqueue(names)
    outcome = await turn.wait(timeout=120)
    assert outcome.status == "completed", outcome
    assert outcome.result == {
        "MODEL": digest("small"),  # the Session's wins over the Actor's
        "REGION": digest("eu"),
        "LLM_API_KEY": digest(secret),
        "T_TOKEN": digest(team),
        "UNSET": None,
    }

    view = await session.retrieve()
    custom = client.CustomObjectsApi(api_client)
    seen = [
        json.dumps([event.model_dump(mode="json") for event in await all_events(session)]),
        json.dumps(view.model_dump(mode="json")),
        json.dumps(
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "sessions", view.name)
        ),
        json.dumps(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "turns")),
        json.dumps(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workspaces")),
        dumped(core.list_namespaced_event(namespace)),
        *(dumped(pod) for pod in runner_pods(core, namespace)),
    ]
    with operator.log.open("rb") as log:
        log.seek(log_start)
        seen.append(log.read().decode(errors="replace"))
    for text in seen:
        assert secret not in text
        assert team not in text
    # The pod names the Secret's key, as the kubelet needs it.
    [pod] = runner_pods(core, namespace)
    [container] = pod.spec.containers
    refs = [var.value_from.secret_key_ref for var in container.env if var.value_from]
    assert [(ref.name, ref.key) for ref in refs] == [("llm", "api-key")]
    assert [source.secret_ref.name for source in container.env_from] == ["team"]


async def test_a_kubectl_sessions_settings_reach_its_actor(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    body = client.V1Secret(metadata=client.V1ObjectMeta(name="llm"), string_data={"k": secret})
    core.create_namespaced_secret(namespace, body)
    actor = create_actor(api_client, namespace, runner_image, ACTOR, entrypoint="settings:settings")
    await operator_watches(api_client, namespace, actor)
    kubectl_apply(
        kubeconfig,
        namespace,
        f"""
apiVersion: {GROUP}/{VERSION}
kind: Session
metadata: {{name: with-settings}}
spec:
  actorRef: {{name: {ACTOR}}}
  workspace: ws
  env:
    - {{name: KEY, valueFrom: {{secretKeyRef: {{name: llm, key: k}}}}}}
---
apiVersion: {GROUP}/{VERSION}
kind: Turn
metadata: {{name: which}}
spec:
  sessionRef: {{name: with-settings}}
  input: [KEY]
""",
    )
    status = await turn_resource_settled(api_client, namespace, "which", ("completed", "failed"))
    assert status["result"] == {"KEY": digest(secret)}, status
