"""The API against the real apiserver: Kubernetes tokens, and CRs in step."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kubernetes import client

from helmr.client import Client, SessionRef
from helmr.control.control import Control
from helmr.kube.reviews import Reviewed, Reviews
from helmr.resources import GROUP, SESSIONS, TURNS, VERSION
from helmr.server import StaticRunnerTokens, build_app
from helmr.server.kube_auth import KubeAuthenticator
from helmr.store import Store

from .conftest import Operator, kubectl_apply
from .sessions import (
    create_actor,
    eventually,
    operator_watches,
    service_account_token,
    start_session,
    turn_resource_settled,
)


def grant_sessions(api_client: client.ApiClient, namespace: str, account: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="helmr-sessions"),
            rules=[
                client.V1PolicyRule(
                    api_groups=[GROUP], resources=["sessions"], verbs=["get", "create", "update"]
                )
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="helmr-sessions"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="helmr-sessions"
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)
            ],
        ),
    )


def granted(api_client: client.ApiClient, namespace: str, account: str) -> bool:
    """Whether the apiserver authorizes the account to create Sessions in ``namespace``."""
    caller = Reviewed(name=f"system:serviceaccount:{namespace}:{account}")
    return Reviews(api_client).access(caller, GROUP, SESSIONS, namespace, "create")


@pytest.fixture
async def kube_api(
    api_client: client.ApiClient, tmp_path: Path
) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    """The real app with the Kubernetes authenticator (TokenReview + SubjectAccessReview)."""
    store = await Store.open(tmp_path / "helmr.db")
    app = build_app(Control(store), KubeAuthenticator(api_client), StaticRunnerTokens())
    async with TestClient(TestServer(app)) as http:
        yield http
    await store.close()


async def test_kubernetes_tokens_are_authenticated_and_authorised_per_namespace(
    kube_api: TestClient[web.Request, web.Application],
    core: client.CoreV1Api,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="caller"))
    )
    token = service_account_token(core, namespace, "caller", seconds=600)
    grant_sessions(api_client, namespace, "caller")
    # The apiserver's RBAC authorizer reads Roles and bindings from its own watch
    # cache: a binding just created takes effect a moment later (a SubjectAccessReview
    # right after it was denied, which failed a CI run).
    await eventually(
        lambda: granted(api_client, namespace, "caller"), what="the Role's grant in effect"
    )
    headers = {"Authorization": f"Bearer {token}"}
    body = {"workspace": "ws"}

    allowed = await kube_api.post(
        f"/v1/namespaces/{namespace}/actors/echo/sessions", json=body, headers=headers
    )
    elsewhere = await kube_api.post(
        "/v1/namespaces/default/actors/echo/sessions", json=body, headers=headers
    )
    forged = await kube_api.post(
        f"/v1/namespaces/{namespace}/actors/echo/sessions",
        json=body,
        headers={"Authorization": f"Bearer {uuid.uuid4().hex}"},
    )

    assert allowed.status == 200, await allowed.text()
    session_id = (await allowed.json())["session"]["id"]
    read = await kube_api.get(f"/v1/sessions/{session_id}", headers=headers)
    assert read.status == 200
    assert elsewhere.status == 403
    assert (await elsewhere.json())["error"]["code"] == "forbidden"
    assert forged.status == 401
    assert (await forged.json())["error"]["code"] == "unauthenticated"


async def test_api_enqueue_creates_turn_crs_and_kubectl_turns_are_admitted_alike(
    operator: Operator,
    api_client: client.ApiClient,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    await operator_watches(api_client, namespace, create_actor(api_client, namespace, runner_image))
    custom = client.CustomObjectsApi(api_client)
    async with Client(operator.url, operator.token) as helmr:
        session = await start_session(helmr, namespace)
        through_api = await session.enqueue("from the API")
        await through_api.wait(timeout=120)
        state = await session.retrieve()

        kubectl_apply(
            kubeconfig,
            namespace,
            f"""
apiVersion: {GROUP}/{VERSION}
kind: Turn
metadata: {{name: by-kubectl}}
spec:
  sessionRef: {{name: {state.name}}}
  input: {{from: kubectl}}
""",
        )
        status = await turn_resource_settled(api_client, namespace, "by-kubectl")

    api_cr = custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, TURNS, label_selector=f"helmr.dev/turn-id={through_api.id}"
    )["items"]
    assert [cr["status"]["phase"] for cr in api_cr] == ["completed"]
    assert api_cr[0]["status"]["result"] == {"echo": "from the API"}
    assert status["sequence"] == 2
    assert status["result"] == {"echo": {"from": "kubectl"}}
    session_cr = custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, SESSIONS, state.name
    )
    owners = [(o["kind"], o["uid"]) for o in api_cr[0]["metadata"]["ownerReferences"]]
    assert owners == [("Session", session_cr["metadata"]["uid"])]
    assert session_cr["status"]["sessionId"] == session.id
    assert session_cr["status"]["phase"] == "open"


async def test_deleting_the_session_resource_cancels_the_session(
    misbehaving_session: SessionRef, api_client: client.ApiClient, namespace: str
) -> None:
    session = misbehaving_session  # its {"sleep": s} keeps the first turn running
    running = await session.enqueue({"sleep": 120})
    queued = await session.enqueue("never runs")

    async def is_running() -> bool:
        return (await running.retrieve()).status == "running"

    await eventually(is_running, what="the first turn to run")
    name = (await session.retrieve()).name
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, SESSIONS, name
    )

    async def closed() -> bool:
        return (await session.retrieve()).status == "closed"

    await eventually(closed, timeout=60, what="the session to close")
    state = await session.retrieve()
    assert state.closed_how == "cancel"
    interrupted = await running.retrieve()
    assert interrupted.status == "interrupted"
    # Cancelled by the deletion itself, not found later as a lost execution.
    assert interrupted.reason == "cancel"
    assert (await queued.retrieve()).status == "cancelled"
