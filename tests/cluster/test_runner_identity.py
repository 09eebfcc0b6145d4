"""Least privilege for runner identity (issue 10, item 5), against a real apiserver.

- The chart's RBAC, as rendered by helm and applied to this cluster, lets the
  control plane read no Secret at all (not one it did not create, not one in
  its own namespace) while it may review tokens and start runner pods.
- A runner pod runs as the `helmr-runner` service account (no RBAC, no API
  token) with a projected token for the Helmr audience; sessions run turns
  end to end with that identity alone, and no Secret is made for it.
- That token (minted as its kubelet mints it) is refused by the apiserver
  (401 at /api), by the runner API for another session or another epoch of
  its own (403), and by the public API (401); it is accepted for its own
  session and epoch.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes import client

from helmr.client import Client
from helmr.operator.runners import pods
from helmr.protocol import EPOCH_HEADER, routes

from .chart import render_chart
from .conftest import Operator, create_namespace, delete_namespace, kubectl
from .sessions import eventually, runner_token, two_sessions


def _chart_rbac(namespace: str, *values: str) -> list[dict[str, object]]:
    """The chart's ServiceAccount and RBAC objects for a release in ``namespace``
    (``values``: ``--set`` arguments)."""
    return render_chart(namespace, ["rbac.yaml", "serviceaccount.yaml"], *values)


@pytest.fixture
def installed_rbac(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    """The chart's RBAC applied with its release in ``namespace``: the control
    plane's user name (its service account)."""
    yield from _installed(kubeconfig, _chart_rbac(namespace), tmp_path)


@pytest.fixture
def rbac_serving_its_namespace(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    """As ``installed_rbac``, with ``watchNamespaces`` the release's namespace alone."""
    objects = _chart_rbac(namespace, f"watchNamespaces={{{namespace}}}")
    yield from _installed(kubeconfig, objects, tmp_path)


def _installed(kubeconfig: str, objects: list[dict[str, object]], tmp_path: Path) -> Iterator[str]:
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    applied = kubectl(kubeconfig, "apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    [account] = [o for o in objects if o["kind"] == "ServiceAccount"]
    meta: dict[str, str] = account["metadata"]  # type: ignore[assignment]
    try:
        yield f"system:serviceaccount:{meta['namespace']}:{meta['name']}"
    finally:
        kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", str(manifest))


def can_i(kubeconfig: str, user: str, *args: str) -> bool:
    """``kubectl auth can-i ... --as user``: the apiserver's own answer."""
    done = kubectl(kubeconfig, "auth", "can-i", *args, f"--as={user}")
    assert done.stdout.strip() in ("yes", "no"), (done.stdout, done.stderr)
    return done.stdout.strip() == "yes"


@pytest.fixture
def other_namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)


def test_the_control_plane_may_read_no_secret(
    kubeconfig: str,
    core: client.CoreV1Api,
    namespace: str,
    other_namespace: str,
    installed_rbac: str,
) -> None:
    plane = installed_rbac
    for ns in (namespace, other_namespace):
        core.create_namespaced_secret(
            ns,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name="not-helmrs"), string_data={"k": "v"}
            ),
        )
    # The authorizer learns of the new ClusterRoleBinding a moment later: wait
    # until what the chart does grant is granted, so each "no" below means no.
    deadline = time.monotonic() + 30
    while not can_i(kubeconfig, plane, "create", "tokenreviews.authentication.k8s.io"):
        assert time.monotonic() < deadline, "the chart's ClusterRoleBinding never took effect"
        time.sleep(0.2)
    assert can_i(kubeconfig, plane, "create", "pods", "-n", other_namespace)
    assert can_i(kubeconfig, plane, "create", "serviceaccounts", "-n", other_namespace)

    for ns in (other_namespace, namespace):
        assert not can_i(kubeconfig, plane, "get", "secret/not-helmrs", "-n", ns)
        for verb in ("get", "list", "watch", "create", "update", "delete"):
            assert not can_i(kubeconfig, plane, verb, "secrets", "-n", ns), verb
    assert not can_i(kubeconfig, plane, "list", "secrets", "--all-namespaces")
    token_request = ("create", "serviceaccounts", "--subresource=token", "-n", other_namespace)
    assert not can_i(kubeconfig, plane, *token_request)
    # And the apiserver refuses the read itself, not only the question.
    read = kubectl(
        kubeconfig, "get", "secret", "not-helmrs", "-n", other_namespace, f"--as={plane}"
    )
    assert read.returncode != 0
    assert "Forbidden" in read.stderr, read.stderr


NETWORK_POLICIES = "networkpolicies.networking.k8s.io"


def test_the_control_plane_writes_network_policies_only_where_it_serves(
    kubeconfig: str, namespace: str, other_namespace: str, rbac_serving_its_namespace: str
) -> None:
    plane = rbac_serving_its_namespace
    deadline = time.monotonic() + 30
    while not can_i(kubeconfig, plane, "create", "pods", "-n", namespace):
        assert time.monotonic() < deadline, "the chart's RoleBinding never took effect"
        time.sleep(0.2)
    # Server-side apply: create for the first write, patch for each after.
    assert can_i(kubeconfig, plane, "create", NETWORK_POLICIES, "-n", namespace)
    assert can_i(kubeconfig, plane, "patch", NETWORK_POLICIES, "-n", namespace)
    for verb in ("get", "list", "watch", "update", "delete"):
        assert not can_i(kubeconfig, plane, verb, NETWORK_POLICIES, "-n", namespace), verb
    for verb in ("create", "patch"):
        assert not can_i(kubeconfig, plane, verb, NETWORK_POLICIES, "-n", other_namespace), verb


def _apiserver_status(api_client: client.ApiClient, token: str) -> int:
    """The status of ``GET /api`` with ``token`` as the only credential."""
    config = api_client.configuration
    context = ssl.create_default_context(cafile=config.ssl_ca_cert)
    request = urllib.request.Request(
        f"{config.host}/api", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as e:
        return e.code


async def _runner_call(
    http: aiohttp.ClientSession, url: str, token: str, session_id: str, epoch: int, turn_id: str
) -> int:
    """A read-only runner call (the stop channel, about a turn): its status."""
    async with http.post(
        url + routes.stops(session_id),
        json={"turn_ids": [turn_id], "timeout": 1},
        headers={"Authorization": f"Bearer {token}", EPOCH_HEADER: str(epoch)},
    ) as reply:
        return reply.status


async def test_a_runner_is_its_own_pod_and_nothing_more(
    helmr: Client,
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    a, b = await two_sessions(helmr, api_client, namespace, runner_image)
    # Real turns, end to end, on the projected identity alone.
    for text in ("a runs", "and again"):
        done = await (await a.enqueue(text)).wait(timeout=120)
        assert (done.status, done.result) == ("completed", {"echo": text})
    a_turn = done.id
    b_turn = await b.enqueue({"sleep": 6})

    async def b_running() -> bool:
        return (await b_turn.retrieve()).status == "running"

    await eventually(b_running, timeout=120, what="B's turn running")
    a_view = await a.retrieve()

    pod = core.read_namespaced_pod(pods.pod_name(a_view.name, a_view.process_epoch), namespace)
    assert pod.spec.service_account_name == pods.RUNNER_SERVICE_ACCOUNT
    assert pod.spec.automount_service_account_token is False
    [projected] = [v.projected for v in pod.spec.volumes if v.projected is not None]
    [source] = projected.sources or []
    token_source = source.service_account_token
    assert (token_source.audience, token_source.expiration_seconds) == (
        pods.RUNNER_AUDIENCE,
        pods.TOKEN_SECONDS,
    )
    account = core.read_namespaced_service_account(pods.RUNNER_SERVICE_ACCOUNT, namespace)
    assert account.automount_service_account_token is False
    assert core.list_namespaced_secret(namespace).items == []  # none made for runners
    runner_user = f"system:serviceaccount:{namespace}:{pods.RUNNER_SERVICE_ACCOUNT}"
    for verb, what in [("get", "pods"), ("list", "secrets"), ("create", "pods")]:
        assert not can_i(kubeconfig, runner_user, verb, what, "-n", namespace)

    token = runner_token(core, namespace, a_view.name, a_view.process_epoch)
    # The apiserver does not take it for its own API: the audience is Helmr's.
    assert _apiserver_status(api_client, token) == 401
    b_view = await b.retrieve()
    async with aiohttp.ClientSession() as http:
        own = await _runner_call(http, operator.url, token, a.id, a_view.process_epoch, a_turn)
        other_session = await _runner_call(
            http, operator.url, token, b.id, b_view.process_epoch, b_turn.id
        )
        other_epoch = await _runner_call(
            http, operator.url, token, a.id, a_view.process_epoch + 1, a_turn
        )
        async with http.get(
            f"{operator.url}/v1/sessions/{a.id}", headers={"Authorization": f"Bearer {token}"}
        ) as reply:
            public = reply.status
    assert own == 200
    assert other_session == 403
    assert other_epoch == 403
    assert public == 401
    done = await b_turn.wait(timeout=120)
    assert (done.status, done.result) == ("completed", {"echo": {"sleep": 6}})
