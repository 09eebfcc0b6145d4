"""Runner pods are contained (issue 30, item 2), proved from inside real runner
pods on a cluster that enforces NetworkPolicy (kube-router, hack/network-policy.sh).

A runner of an Actor with no ``spec.network`` resolves names and reaches the
runner API (its Turns complete), and nothing else: not the apiserver, not the
control plane's public API, not another namespace's pod or Service, not the
metadata address; and no other runner pod reaches it. An Actor allowing
0.0.0.0/0 reaches all of those but the metadata address, which stays closed
inside any CIDR unless named exactly, as a third Actor does.

The metadata address is a stand-in this test serves on the node (an address on
the loopback interface), named to the control plane by its setting: the host's
rules drop every packet to the real link-local one, and no test sends any there.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client

from helmr.client import Client, SessionRef
from helmr.kube.labels import LABEL_SESSION_ID

from .conftest import OWN_PREFIX, Operator, create_namespace, delete_namespace
from .pods import serve
from .sessions import create_actor, eventually, operator_watches
from .test_network_policy import PORT, SERVER

METADATA_STAND_IN = "10.254.169.254"
"""An address outside the cluster's pod and Service ranges, put on the node's
loopback interface for this test: the runner pods' "metadata endpoint"."""
SERVE_PORT = 9000
"""Where a runner pod listens when asked (``netprobe``'s ``serve``)."""
APISERVER = ("10.96.0.1", 443)
"""The ``kubernetes`` Service (hack/lib/cluster.sh's Service range, first address)."""


def _listen(host: str) -> tuple[socket.socket, int]:
    server = socket.create_server((host, 0))
    threading.Thread(target=_accept_forever, args=(server,), daemon=True).start()
    return server, int(server.getsockname()[1])


def _accept_forever(server: socket.socket) -> None:
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return  # closed by the fixture
        connection.close()


@pytest.fixture
def metadata_stand_in() -> Iterator[int]:
    """A listener at :data:`METADATA_STAND_IN` on the node: its port."""
    added = subprocess.run(
        ["ip", "address", "add", f"{METADATA_STAND_IN}/32", "dev", "lo"],
        capture_output=True,
        text=True,
    )
    if added.returncode != 0 and "File exists" not in added.stderr:
        pytest.skip(f"no stand-in metadata address on this node: {added.stderr.strip()}")
    server, port = _listen(METADATA_STAND_IN)
    try:
        yield port
    finally:
        server.close()
        if added.returncode == 0:
            subprocess.run(["ip", "address", "del", f"{METADATA_STAND_IN}/32", "dev", "lo"])


@pytest.fixture
def network_operator(
    kubeconfig: str, crds: None, runner_image: str, tmp_path: Path
) -> Iterator[Operator]:
    """A control plane of this test's own (its public API and runner API on ports of
    their own, as the chart serves them), told the stand-in is the metadata address."""
    operator = Operator.for_cluster(
        kubeconfig,
        tmp_path,
        own_runner_port=True,
        HELMR_RECONCILE_INTERVAL="0.5",
        HELMR_RUNNER_METADATA_ADDRESSES=METADATA_STAND_IN,
    )
    operator.start(namespaces=f"{OWN_PREFIX}*")
    yield operator
    operator.stop()


@pytest.fixture
def served(core: client.CoreV1Api) -> Iterator[str]:
    name = create_namespace(core, prefix=OWN_PREFIX)
    yield name
    delete_namespace(core, name)


@pytest.fixture
def elsewhere(core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    """A listening pod in a namespace of its own, and a Service of it: their addresses."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    yield serve(core, namespace, "server", SERVER, PORT)
    delete_namespace(core, namespace)


def netprobe(
    api_client: client.ApiClient, namespace: str, image: str, name: str, **spec: Any
) -> None:
    create_actor(api_client, namespace, image, name, entrypoint="netprobe:netprobe", **spec)


async def probe(session: SessionRef, **asked: Any) -> dict[str, Any]:
    """``netprobe``'s result for a Turn asking ``asked``: each connect's outcomes
    (``list[bool]``), and what else it was asked."""
    outcome = await (await session.enqueue(asked)).wait(timeout=180)
    assert outcome.status == "completed", outcome
    result: dict[str, Any] = outcome.result  # type: ignore[assignment]
    return result


def closed(outcomes: list[bool]) -> bool:
    """Closed by the end and, once closed, closed for good: the engine applies a
    policy to a new pod a moment after the pod appears."""
    return False in outcomes and not any(outcomes[outcomes.index(False) :])


def runner_ip(core: client.CoreV1Api, namespace: str, session: SessionRef) -> str:
    [pod] = core.list_namespaced_pod(
        namespace, label_selector=f"{LABEL_SESSION_ID}={session.id}"
    ).items
    return str(pod.status.pod_ip)


def reachable_from_the_node(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


async def test_a_runner_reaches_dns_and_the_runner_api_alone_unless_its_actor_allows_more(
    network_operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    served: str,
    elsewhere: tuple[str, str],
    metadata_stand_in: int,
    runner_image: str,
) -> None:
    pod_ip, service_ip = elsewhere
    runner_api = urlsplit(network_operator.runner_url)
    node, runner_port = str(runner_api.hostname), int(runner_api.port or 0)
    public_port = int(urlsplit(network_operator.url).port or 0)
    assert public_port != runner_port
    netprobe(api_client, served, runner_image, "closed")
    netprobe(api_client, served, runner_image, "open", network={"egress": [{"cidr": "0.0.0.0/0"}]})
    named = [
        {"cidr": f"{METADATA_STAND_IN}/32", "ports": [{"port": metadata_stand_in}]},
        {"cidr": f"{pod_ip}/32", "ports": [{"port": PORT}]},
    ]
    netprobe(api_client, served, runner_image, "named", network={"egress": named})
    await operator_watches(api_client, served, "closed")
    targets = {
        "apiserver": list(APISERVER),
        "public API": [node, public_port],
        "pod elsewhere": [pod_ip, PORT],
        "Service elsewhere": [service_ip, PORT],
        "metadata": [METADATA_STAND_IN, metadata_stand_in],
    }

    async with Client(network_operator.url, network_operator.token) as helmr:
        closed_session, _ = await helmr.actors.start("closed", namespace=served, workspace="a")
        seen = await probe(
            closed_session,
            serve=SERVE_PORT,
            connect=targets | {"runner API": [node, runner_port]},
            resolve=["kubernetes.default"],
        )
        # Its Turn completed: it reached the runner API, as the probe says too.
        assert all(seen["runner API"]), seen
        assert all(seen["kubernetes.default"]), seen
        for label in targets:
            assert closed(seen[label]), (label, seen)

        closed_ip = runner_ip(core, served, closed_session)
        # It listens (the node, which policies always admit, reaches it) ...
        await eventually(
            lambda: reachable_from_the_node(closed_ip, SERVE_PORT), what="the runner listening"
        )
        # ... and another runner, whose own policy lets it reach anything, may not.
        open_session, _ = await helmr.actors.start("open", namespace=served, workspace="b")
        seen = await probe(
            open_session, connect=targets | {"runner elsewhere": [closed_ip, SERVE_PORT]}
        )
        for label in ("apiserver", "public API", "pod elsewhere", "Service elsewhere"):
            assert all(seen[label]), (label, seen)
        # Inside 0.0.0.0/0, the metadata address stays closed; so does a runner pod.
        assert closed(seen["metadata"]), seen
        assert closed(seen["runner elsewhere"]), seen

        named_session, _ = await helmr.actors.start("named", namespace=served, workspace="c")
        seen = await probe(
            named_session,
            connect={
                "metadata": targets["metadata"],
                "pod elsewhere": targets["pod elsewhere"],
                "apiserver": targets["apiserver"],
            },
        )
        # Named exactly, the metadata address is open; what is not named stays closed.
        assert all(seen["metadata"]), seen
        assert all(seen["pod elsewhere"]), seen
        assert closed(seen["apiserver"]), seen
