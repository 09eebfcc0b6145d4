"""Fixtures for cluster tests: a real apiserver, never a mock.

``KUBECONFIG`` wins when set; otherwise the local cluster is brought up once
per test run by ``hack/cluster-up.sh`` (idempotent, fast when already up).
Every test gets a fresh namespace, deleted afterwards.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get("KUBECONFIG")
    if not path:
        out = subprocess.run(
            ["bash", str(REPO / "hack" / "cluster-up.sh")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        path = out.strip().splitlines()[-1]
        os.environ["KUBECONFIG"] = path
    return path


@pytest.fixture(scope="session")
def api_client(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)


@pytest.fixture(scope="session")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def kubectl(kubeconfig: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the cluster's own kubectl; returns the finished process (check it yourself)."""
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="session")
def crds(kubeconfig: str) -> None:
    """Installs the committed CRDs and waits until they are served."""
    applied = kubectl(kubeconfig, "apply", "--server-side", "-f", str(REPO / "crds"))
    assert applied.returncode == 0, applied.stderr
    waited = kubectl(
        kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "crds")
    )
    assert waited.returncode == 0, waited.stderr


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={"pod-security.kubernetes.io/enforce": "restricted"},
            )
        )
    )
    yield name
    core.delete_namespace(name, propagation_policy="Background")
