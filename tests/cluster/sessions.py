"""Helpers for session-loop cluster tests: Actors, sessions, event reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from kubernetes import client

from helmr.client import Client, Event, SessionRef
from helmr.operator.runners import pods
from helmr.resources import ACTORS, API_VERSION, GROUP, TURNS, VERSION

ECHO_ENTRYPOINT = "echo.echo:echo"
MISBEHAVING = "misbehaving"
"""The Actor of ``tests/actors/misbehaving.py``: echo, with a crash, raise or sleep on request."""


def create_actor(
    api_client: client.ApiClient, namespace: str, image: str, name: str = "echo", **spec: Any
) -> str:
    body = {
        "apiVersion": API_VERSION,
        "kind": "Actor",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": image,
            "imagePullPolicy": "Never",
            "entrypoint": ECHO_ENTRYPOINT,
            "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "10m"}},
            **spec,
        },
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, ACTORS, body
    )
    return name


def create_misbehaving_actor(
    api_client: client.ApiClient, namespace: str, image: str, **spec: Any
) -> str:
    entrypoint = f"{MISBEHAVING}:{MISBEHAVING}"
    return create_actor(api_client, namespace, image, MISBEHAVING, entrypoint=entrypoint, **spec)


async def start_session(helmr: Client, namespace: str, actor: str = "echo") -> SessionRef:
    session, _ = await helmr.actors.start(actor, namespace=namespace, workspace="ws")
    return session


async def two_sessions(
    helmr: Client, api_client: client.ApiClient, namespace: str, image: str
) -> tuple[SessionRef, SessionRef]:
    """Two sessions of the misbehaving echo in ``namespace``, on Workspaces ws-a and ws-b."""
    actor = create_misbehaving_actor(api_client, namespace, image)
    a, _ = await helmr.actors.start(actor, namespace=namespace, workspace="ws-a")
    b, _ = await helmr.actors.start(actor, namespace=namespace, workspace="ws-b")
    return a, b


async def all_events(session: SessionRef) -> list[Event]:
    records: list[Event] = []
    after = 0
    while True:
        page = await session.events.list(after=after, limit=1000)
        records += page.records
        after = page.next_after
        if not page.has_more:
            return records


def service_account_token(
    core: client.CoreV1Api,
    namespace: str,
    account: str,
    *,
    seconds: int,
    audiences: Sequence[str] = (),
    bound_to: client.V1BoundObjectReference | None = None,
) -> str:
    """A token of the service account ``account``, minted by a TokenRequest (as
    ``kubectl create token`` or a kubelet does): for ``audiences`` (none: the
    apiserver's own), valid ``seconds``, and bound to an object if ``bound_to``."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=list(audiences), expiration_seconds=seconds, bound_object_ref=bound_to
        )
    )
    token = core.create_namespaced_service_account_token(account, namespace, request).status.token
    assert token, f"no token minted for {namespace}/{account}"
    return str(token)


def runner_token(core: client.CoreV1Api, namespace: str, session_name: str, epoch: int) -> str:
    """A token of the runner pod of the session's ``epoch`` exactly as its kubelet
    mints one (TokenRequest: the runner service account's, for the Helmr audience,
    bound to that pod), without reading it out of the pod."""
    return pod_token(
        core, namespace, core.read_namespaced_pod(pods.pod_name(session_name, epoch), namespace)
    )


def pod_token(core: client.CoreV1Api, namespace: str, pod: client.V1Pod) -> str:
    """A token of runner ``pod`` as its kubelet mints one (TokenRequest: the runner
    service account's, for the Helmr audience, bound to that pod)."""
    return service_account_token(
        core,
        namespace,
        pods.RUNNER_SERVICE_ACCOUNT,
        seconds=pods.TOKEN_SECONDS,
        audiences=[pods.RUNNER_AUDIENCE],
        bound_to=client.V1BoundObjectReference(
            api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid
        ),
    )


def runner_pods(core: client.CoreV1Api, namespace: str) -> list[client.V1Pod]:
    return list(
        core.list_namespaced_pod(namespace, label_selector="helmr.dev/component=runner").items
    )


async def eventually(check: Any, timeout: float = 60, what: str = "condition") -> Any:  # noqa: ASYNC109
    """Polls an async or sync ``check`` until it returns a truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


async def turn_resource_settled(
    api_client: client.ApiClient, namespace: str, name: str, phases: Sequence[str] = ("completed",)
) -> dict[str, Any]:
    """The status of the Turn resource ``name`` once its phase is one of ``phases``."""
    custom = client.CustomObjectsApi(api_client)

    def settled() -> dict[str, Any] | None:
        cr: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, TURNS, name
        )
        status: dict[str, Any] = cr.get("status") or {}
        return status if status.get("phase") in phases else None

    return await eventually(settled, timeout=120, what=f"the Turn {name}")  # type: ignore[no-any-return]


def event_data(events: list[Event], kind: str) -> list[dict[str, Any]]:
    """The data of each event of ``kind`` (every lifecycle event's data is an object)."""
    return [e.data for e in events if e.kind == kind]  # type: ignore[misc]


def signal_heard(events: list[Event], turn_id: str) -> dict[str, Any] | None:
    """What the misbehaving actor's ``{"await_signal": s}`` handler wrote as session
    output when the signal of ``turn_id`` fired: {signal, turnId, at}, if it did."""
    for event in events:
        if event.kind != "turn.output" or event.turn_id is not None:
            continue
        for fragment in event.data if isinstance(event.data, list) else []:
            value = fragment.get("json") if isinstance(fragment, dict) else None
            if isinstance(value, dict) and value.get("turnId") == turn_id:
                return value
    return None


async def operator_watches(api_client: client.ApiClient, namespace: str, actor: str) -> None:
    """Waits until the operator watches ``namespace``: it wrote the Actor's Accepted
    condition. The test operator finds namespaces by a name pattern, which kopf
    follows with a watch per namespace, started once kopf has seen the namespace
    (helmr.operator.kopf.namespaces: before it, a namespace created right after
    the operator's start could wait minutes). A test that applies objects for the
    operator to admit waits for this first, so it measures Helmr, not that."""
    custom = client.CustomObjectsApi(api_client)

    def accepted() -> bool:
        got: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, ACTORS, actor
        )
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Accepted" for c in conditions)

    await eventually(accepted, timeout=60, what=f"the operator to watch namespace {namespace}")
