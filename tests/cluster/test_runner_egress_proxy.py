"""Hostname allowlists through the chart's egress proxy (issue 30), proved from inside
real runner pods on a cluster that enforces NetworkPolicy (kube-router).

The chart's egress-proxy objects (``helm template --show-only``) run in a namespace
of their own, restricted; the control plane (this test's, on the node) is told where
the proxy is by the chart's own operator environment. The hostnames are Services of
a namespace of this test, resolved by the cluster's DNS: nothing leaves the machine.

An Actor naming ``*.<web>.svc.cluster.local`` on port 8080, with the ClusterIP of the
Service ``allowed`` as an egress CIDR (the proxy reaches a private address only
inside one; Service addresses are translated to pods' before any policy looks, so
that CIDR opens no direct path): through the proxy its runner reaches ``allowed``
by CONNECT and by plain HTTP, and is refused, with the proxy's reason, ``other``
(allowed by name, at an address outside its CIDRs), ``allowed`` on another port and
the apiserver's name; directly, it reaches neither Service nor their pods. A runner
of an Actor naming no hosts gets no proxy settings and cannot reach the proxy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from helmr.client import Client

from .chart import render_chart
from .conftest import (
    OWN_PREFIX,
    Operator,
    create_namespace,
    delete_namespace,
    kubectl,
)
from .pods import serve
from .sessions import operator_watches
from .test_runner_network import closed, netprobe, probe
from .test_runner_network import served as served  # the fixture

WEB_PORT = 8080
WEB = f"""
import http.server

class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from " + self.headers["Host"].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.ThreadingHTTPServer(("", {WEB_PORT}), Hello).serve_forever()
"""
PROXY_PORT = 3128


def render(namespace: str, template: str, served: str) -> list[dict[str, Any]]:
    """The chart's ``template`` for a release in ``namespace`` serving ``served``,
    with the egress proxy on."""
    return render_chart(
        namespace, [template], "egressProxy.enabled=true", f"watchNamespaces={{{served}}}"
    )


@pytest.fixture
def web(core: client.CoreV1Api) -> Iterator[dict[str, tuple[str, str]]]:
    """Two HTTP servers with Services, ``allowed`` and ``other``, in a namespace of
    their own: each one's Service and pod addresses, and the namespace (``""``)."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    found = {"": (namespace, namespace)}
    for name in ("allowed", "other"):
        pod_ip, service_ip = serve(core, namespace, name, WEB, WEB_PORT)
        found[name] = (service_ip, pod_ip)
    yield found
    delete_namespace(core, namespace)


@pytest.fixture
def proxy_release(
    core: client.CoreV1Api, kubeconfig: str, served: str, runner_image: str
) -> Iterator[tuple[str, dict[str, str]]]:
    """The chart's egress proxy in a restricted namespace of its own, ready: its
    namespace and the operator's environment the chart gives for it."""
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    objects = render(namespace, "egress-proxy.yaml", served)
    items = {"apiVersion": "v1", "kind": "List", "items": objects}
    applied = kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps(items))
    assert applied.returncode == 0, applied.stderr
    [deployment] = render(namespace, "deployment.yaml", served)
    [operator] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in operator["env"] if e["name"].startswith("HELMR_EGRESS")}
    [proxy] = [o for o in objects if o["kind"] == "Deployment"]
    waited = kubectl(
        kubeconfig,
        "-n",
        namespace,
        "rollout",
        "status",
        f"deployment/{proxy['metadata']['name']}",
        "--timeout=110s",
    )
    assert waited.returncode == 0, waited.stderr
    yield namespace, env
    delete_namespace(core, namespace)


@pytest.fixture
def proxied_operator(
    kubeconfig: str, crds: None, proxy_release: tuple[str, dict[str, str]], tmp_path: Path
) -> Iterator[Operator]:
    _, env = proxy_release
    operator = Operator.for_cluster(
        kubeconfig, tmp_path, own_runner_port=True, HELMR_RECONCILE_INTERVAL="0.5", **env
    )
    operator.start(namespaces=f"{OWN_PREFIX}*")
    yield operator
    operator.stop()


async def test_a_runner_reaches_the_hosts_its_actor_names_through_the_proxy_alone(
    proxied_operator: Operator,
    proxy_release: tuple[str, dict[str, str]],
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    served: str,
    web: dict[str, tuple[str, str]],
    runner_image: str,
) -> None:
    namespace = web[""][0]
    allowed_service, allowed_pod = web["allowed"]
    other_service, other_pod = web["other"]
    domain = f"{namespace}.svc.cluster.local"
    network = {
        "egressHosts": [{"host": f"*.{domain}", "ports": [WEB_PORT]}],
        "egress": [{"cidr": f"{allowed_service}/32", "ports": [{"port": WEB_PORT}]}],
    }
    netprobe(api_client, served, runner_image, "proxied", network=network)
    netprobe(api_client, served, runner_image, "unproxied")
    await operator_watches(api_client, served, "proxied")
    proxy_service = core.read_namespaced_service("helmr-egress-proxy", proxy_release[0])
    proxy = [str(proxy_service.spec.cluster_ip), PROXY_PORT]

    async with Client(proxied_operator.url, proxied_operator.token) as helmr:
        session, _ = await helmr.actors.start("proxied", namespace=served, workspace="a")
        seen = await probe(
            session,
            env=["HTTPS_PROXY"],
            tunnel={
                "allowed": [f"allowed.{domain}", WEB_PORT],
                "other": [f"other.{domain}", WEB_PORT],
                "another port": [f"allowed.{domain}", 9090],
                "apiserver": ["kubernetes.default.svc.cluster.local", 443],
            },
            get={"plain": f"http://allowed.{domain}:{WEB_PORT}/"},
            connect={
                "allowed Service": [allowed_service, WEB_PORT],
                "allowed pod": [allowed_pod, WEB_PORT],
                "other Service": [other_service, WEB_PORT],
                "other pod": [other_pod, WEB_PORT],
            },
        )
        assert seen["HTTPS_PROXY"] == proxied_operator.env["HELMR_EGRESS_PROXY_URL"], seen
        # Through the proxy: the allowed host, by CONNECT and by plain HTTP.
        assert str(seen["allowed"]).startswith("HTTP/1.1 200"), seen
        assert f"hello from allowed.{domain}" in str(seen["allowed"]), seen
        assert seen["plain"] == f"200 hello from allowed.{domain}:{WEB_PORT}", seen
        # Refused, with the proxy's reason.
        refusals = {
            "other": f"other.{domain} resolves to {other_service}: not a public address",
            "another port": f"allowed.{domain} is allowed on port {WEB_PORT}, not 9090",
            "apiserver": "kubernetes.default.svc.cluster.local is not among the hosts",
        }
        for label, reason in refusals.items():
            assert str(seen[label]).startswith("HTTP/1.1 403 Forbidden"), (label, seen)
            assert f"helmr egress proxy: {reason}" in str(seen[label]), (label, seen)
        # Around the proxy: nothing, the allowed host's own addresses included.
        for label in ("allowed Service", "allowed pod", "other Service", "other pod"):
            assert closed(seen[label]), (label, seen)

        unproxied, _ = await helmr.actors.start("unproxied", namespace=served, workspace="b")
        seen = await probe(unproxied, env=["HTTPS_PROXY"], connect={"proxy": proxy})
        assert seen["HTTPS_PROXY"] is None, seen
        assert closed(seen["proxy"]), seen
