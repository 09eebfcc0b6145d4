"""The chart with 2 control-plane replicas on PostgreSQL, installed with helm.

The store is a PostgreSQL server of this host (Debian's, started by
tests.postgres), served on the cluster's node IP to the pods. The API is asked
through the apiserver's Service proxy, as a user outside the cluster would.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from helmr.protocol.api_routes import PROXIED_AUTHORIZATION
from helmr.resources import ACTORS, GROUP, SESSIONS, TURNS, VERSION, WORKSPACES
from tests import postgres

from ..conftest import OWN_PREFIX, _node_ip, create_namespace, delete_namespace
from ..test_chart_release import helm, install_chart

LEASE_SECONDS = 6


@dataclass
class Release:
    name: str
    namespace: str
    service: str
    token: str
    base_url: str
    ssl: ssl.SSLContext

    @property
    def headers(self) -> dict[str, str]:
        return {PROXIED_AUTHORIZATION: f"Bearer {self.token}"}


@contextmanager
def node_database() -> Iterator[tuple[postgres.PostgresServer, str]]:
    """A server the cluster's pods reach at the node IP, and a store database's
    URL on it. Durable (fsync on every commit, where the tests' default trades
    that for speed): a crash of the server loses no acknowledged write."""
    binaries = postgres.find_binaries()
    assert binaries is not None, "PostgreSQL is not installed (hack/install-deps.sh)"
    node_ip = _node_ip()
    server = postgres.start(binaries, durable=True, also_listen=node_ip)
    try:
        server.prepare_template()
        with server.database() as url:
            yield server, url.replace("@127.0.0.1:", f"@{node_ip}:")
    finally:
        server.stop()


@contextmanager
def installed_release(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    database: str,
    helm_dir: Path,
) -> Iterator[Release]:
    """The chart, 2 replicas on ``database``, in a namespace of its own; uninstalled after."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    name = f"r{uuid.uuid4().hex[:6]}"
    token = uuid.uuid4().hex
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="store"), string_data={"url": database}),
    )
    values = {
        "replicas": "2",
        "store.postgres.existingSecret": "store",
        "leaderElection.leaseSeconds": str(LEASE_SECONDS),
        "tests.enabled": "false",
        "operator.extraEnv[0].name": "HELMR_AUTH",
        "operator.extraEnv[0].value": f"static:{token}",
    }
    install_chart(kubeconfig, name, namespace, helm_dir, values)
    [service] = core.list_namespaced_service(
        namespace, label_selector=f"app.kubernetes.io/instance={name}"
    ).items
    configuration = api_client.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.load_cert_chain(configuration.cert_file, configuration.key_file)
    base_url = (
        f"{configuration.host}/api/v1/namespaces/{namespace}"
        f"/services/{service.metadata.name}:8080/proxy"
    )
    yield Release(name, namespace, str(service.metadata.name), token, base_url, context)
    helm(kubeconfig, "uninstall", name, "-n", namespace, "--wait")
    _drop_finalizers(api_client, namespace)
    delete_namespace(core, namespace)


def _drop_finalizers(api_client: client.ApiClient, namespace: str) -> None:
    """The control plane that would remove its finalizers (kopf's, on the Actor)
    is uninstalled: without this the namespace stays Terminating for good."""
    custom = client.CustomObjectsApi(api_client)
    for plural in (ACTORS, SESSIONS, TURNS, WORKSPACES):
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)
        for item in listed["items"]:
            if item["metadata"].get("finalizers"):
                custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    item["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )


def lease_holder(api_client: client.ApiClient, release: Release) -> str:
    """The leader's identity: its pod's name, ``_``, a suffix of its process."""
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        f"{release.service}-leader", release.namespace
    )
    holder: str = lease.spec.holder_identity or ""
    return holder


def control_plane_pods(core: client.CoreV1Api, release: Release) -> list[client.V1Pod]:
    pods: list[client.V1Pod] = core.list_namespaced_pod(
        release.namespace, label_selector=f"app.kubernetes.io/instance={release.name}"
    ).items
    return pods


def ready_control_planes(core: client.CoreV1Api, release: Release) -> list[str]:
    return [
        str(p.metadata.name)
        for p in control_plane_pods(core, release)
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]
