"""The chart installed with helm, used the way its users would (issue 10, item 4).

One release per module, in a fresh namespace it also serves: ``helm test``
runs the chart's smoke session, and ``kubectl helmr`` (the plugin executable,
run by the built kubectl with nothing but a kubeconfig in its environment)
finds the release's Service and reads a session's timeline through the
apiserver's Service proxy.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.unit.helm import find_helm

from .conftest import (
    OWN_PREFIX,
    REPO,
    RUNNER_IMAGE,
    create_namespace,
    delete_namespace,
    kubectl,
    kubectl_apply,
)
from .sessions import create_actor, operator_watches, service_account_token
from .test_kubectl import kubectl_path

pytestmark = pytest.mark.helm

VENV_BIN = Path(sys.executable).parent
# The admission policies are cluster-wide, and the `crds` fixture has already
# applied them for every test: a second owner (this release) would be refused.
POST_RENDERER = f"""#!{sys.executable}
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
keep = [d for d in docs if not d["kind"].startswith("ValidatingAdmissionPolicy")]
yaml.safe_dump_all(keep, sys.stdout)
"""


def helm(kubeconfig: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    found = find_helm()
    assert found, "no helm: build it with `make build`"
    return subprocess.run(
        [found, "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def install_chart(
    kubeconfig: str, name: str, namespace: str, workdir: Path, values: dict[str, str]
) -> None:
    """``helm install`` of this checkout's chart as release ``name``, serving its own
    ``namespace``, with the locally built images and ``values`` (``--set``, as a
    user would type them), waiting until it is ready."""
    renderer = workdir / "drop-policies"
    renderer.write_text(POST_RENDERER)
    renderer.chmod(0o755)
    values = {"image.pullPolicy": "Never", "watchNamespaces": f"{{{namespace}}}", **values}
    settings = [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]
    installed = helm(
        kubeconfig,
        "install",
        name,
        str(REPO / "charts" / "helmr"),
        "-n",
        namespace,
        "--post-renderer",
        str(renderer),
        *settings,
        "--wait",
        "--timeout",
        "5m",
    )
    assert installed.returncode == 0, installed.stderr


@pytest.fixture(scope="module")
def release(
    kubeconfig: str,
    core: client.CoreV1Api,
    crds: None,
    runner_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str]]:
    """(release name, namespace): the chart installed as a user would, serving its
    own namespace, with the locally built images."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    name = f"r{uuid.uuid4().hex[:6]}"
    values = {
        "persistence.enabled": "false",
        "tests.imagePullPolicy": "Never",
        "tests.runnerImage": runner_image,
    }
    install_chart(kubeconfig, name, namespace, tmp_path_factory.mktemp("helm"), values)
    yield name, namespace
    helm(kubeconfig, "uninstall", name, "-n", namespace, "--wait")
    delete_namespace(core, namespace)


def test_helm_test_runs_a_smoke_session(kubeconfig: str, release: tuple[str, str]) -> None:
    name, namespace = release
    tested = helm(kubeconfig, "test", name, "-n", namespace, "--logs", "--timeout", "5m")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "Phase:          Succeeded" in tested.stdout, tested.stdout
    assert ": completed, result={'echo': {'smoke':" in tested.stdout, tested.stdout
    # The smoke runner ran contained (the cluster enforces NetworkPolicy): its
    # namespace's policy lets it reach this release's pods alone, at the runner port.
    got = kubectl(
        kubeconfig, "get", "networkpolicy", "helmr-runners", "-n", namespace, "-o", "json"
    )
    assert got.returncode == 0, got.stderr
    to_control_plane = json.loads(got.stdout)["spec"]["egress"][1]
    [peer] = to_control_plane["to"]
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == name
    assert to_control_plane["ports"] == [{"port": 8081, "protocol": "TCP"}]


def test_the_released_control_plane_runs_on_uvloop(
    core: client.CoreV1Api, release: tuple[str, str]
) -> None:
    """The operator image has uvloop, and `kopf run` takes it when installed: the
    control plane's event loop is in C (docs/sizing.md, "The control plane on uvloop")."""
    name, namespace = release
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=control-plane"
    [pod] = core.list_namespaced_pod(namespace, label_selector=selector).items
    log: str = core.read_namespaced_pod_log(str(pod.metadata.name), namespace)
    assert "event loop: uvloop" in log, log[-2000:]


# What a kubectl user of the sessions in one namespace is granted: Helmr's
# session verbs, and reaching Helmr's API through the apiserver (services/proxy:
# get for reads, create for POSTs) after finding its Service (get, list).
RBAC_GROUP = "rbac.authorization.k8s.io"
USER_ROLE = [
    {"apiGroups": ["helmr.dev"], "resources": ["sessions"], "verbs": ["get", "create", "update"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get", "create"]},
]


def token_kubeconfig(admin_kubeconfig: str, token: str, namespace: str, path: Path) -> Path:
    """A kubeconfig of one service-account token, its context in ``namespace``."""
    admin: dict[str, Any] = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "user", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "user",
                        "context": {
                            "cluster": cluster["name"],
                            "user": "user",
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": "user",
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def user_kubeconfig(
    kubeconfig: str,
    core: client.CoreV1Api,
    release: tuple[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A kubeconfig holding only a bearer token of a service account that may use
    sessions in the release's namespace."""
    _, namespace = release
    manifests = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "user"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "helmr-user"},
            "rules": USER_ROLE,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "helmr-user"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "helmr-user",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "user", "namespace": namespace}],
        },
    ]
    # YAML documents: kubectl reads a stream that starts with "{" as JSON,
    # and then a "---" between documents is a parse error.
    kubectl_apply(kubeconfig, namespace, yaml.safe_dump_all(manifests))
    token = service_account_token(core, namespace, "user", seconds=3600)
    path = tmp_path_factory.mktemp("user") / "kubeconfig"
    return token_kubeconfig(kubeconfig, token, namespace, path)


def plugin_env(config: Path) -> dict[str, str]:
    """Only KUBECONFIG (and PATH, to find kubectl and the plugin): no HELMR_URL,
    no HELMR_TOKEN, as kubectl runs the plugin for its user."""
    return {
        "KUBECONFIG": str(config),
        "PATH": f"{Path(kubectl_path()).parent}:{VENV_BIN}:/usr/bin:/bin",
        "HOME": str(config.parent),
    }


def kubectl_helmr(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "helmr", *args],
        env=plugin_env(config),
        capture_output=True,
        text=True,
        timeout=180,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return done.stdout


def test_kubectl_helmr_follows_a_session_through_the_apiserver(
    api_client: client.ApiClient, release: tuple[str, str], user_kubeconfig: Path
) -> None:
    _, namespace = release
    actor = create_actor(api_client, namespace, RUNNER_IMAGE)
    asyncio.run(operator_watches(api_client, namespace, actor))
    via = ("--route", "apiserver", "--json")
    started = json.loads(
        ok(kubectl_helmr(user_kubeconfig, *via, "session", "start", actor, "-w", "ws"))
    )
    session_id = started["session"]["id"]
    # The with block closes the follower's pipes whatever happens; finally stops it first.
    with subprocess.Popen(
        ["kubectl", "helmr", *via, "session", "events", session_id, "--follow"],
        env=plugin_env(user_kubeconfig),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as follow:
        try:
            enqueued = json.loads(
                ok(kubectl_helmr(user_kubeconfig, *via, "session", "enqueue", session_id, '"hi"'))
            )
            turn_id = enqueued["id"]
            wait = ("session", "turn", "wait", session_id, turn_id, "--timeout", "120")
            waited = ok(kubectl_helmr(user_kubeconfig, *via, *wait))
            assert json.loads(waited)["status"] == "completed", waited
            ok(kubectl_helmr(user_kubeconfig, *via, "session", "close", session_id))
            out, err = follow.communicate(timeout=60)  # --follow ends with the session
        finally:
            follow.kill()
    assert follow.returncode == 0, err
    kinds = [json.loads(line)["kind"] for line in out.splitlines() if line.strip()]
    assert {"turn.queued", "turn.running", "turn.completed", "session.closed"} <= set(kinds), kinds


def test_a_certificate_kubeconfig_acts_as_a_named_service_account(
    kubeconfig: str, release: tuple[str, str], user_kubeconfig: Path
) -> None:
    """The admin kubeconfig authenticates with a client certificate, which Helmr
    cannot review: it is refused, and calls as a service account it mints a token for."""
    _, namespace = release
    admin = Path(kubeconfig)
    args = ("--route", "apiserver", "-n", namespace, "session", "get", "no-such-session")
    refused = kubectl_helmr(admin, *args)
    assert refused.returncode == 3, refused.stderr
    assert "--as-service-account" in refused.stderr
    minted = kubectl_helmr(admin, "--as-service-account", f"{namespace}/user", *args)
    # Through the apiserver to Helmr, authenticated: Helmr's own 404 for the id.
    assert minted.returncode == 1, minted.stderr
    assert "not_found" in minted.stderr, minted.stderr
