"""``kubectl helmr``: the CLI over the endpoint discovery finds (a live app on
loopback stands in for the route), and the discovery's steps that need no
apiserver: reading kubeconfigs, choosing the token, the proxy URL, routability.

Finding the Service and the apiserver route are exercised against a real
cluster in tests/cluster/test_chart_release.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kubernetes import client as k8s

from helmr.kube.kubeconfig import Apiserver, ServiceInfo, service_info
from helmr.kubectl import command as plugin
from helmr.kubectl import discovery
from helmr.protocol.api_routes import PROXIED_AUTHORIZATION
from tests.unit.api import ADMIN, NAMESPACE, Api


def use_endpoint(monkeypatch: pytest.MonkeyPatch, api: Api, headers: dict[str, str]) -> None:
    found = discovery.Endpoint(api.url, headers, None, "the test's app")
    monkeypatch.setattr(plugin, "endpoint", lambda request: found)


async def kubectl_helmr(*args: str) -> Result:
    # No HELMR_URL, HELMR_TOKEN or HELMR_NAMESPACE: the plugin finds what it needs.
    env = {"HELMR_URL": None, "HELMR_TOKEN": None, "HELMR_NAMESPACE": None}
    return await asyncio.to_thread(CliRunner().invoke, plugin.main, list(args), env=env)


async def test_commands_run_over_the_found_endpoint_with_the_proxied_token(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the apiserver route sends: the token in PROXIED_AUTHORIZATION only.
    use_endpoint(monkeypatch, api, {PROXIED_AUTHORIZATION: f"Bearer {ADMIN}"})
    # -n is also `session start`'s namespace.
    started = await kubectl_helmr(
        "-n", NAMESPACE, "--json", "session", "start", "reviewer", "-w", "ws"
    )
    assert started.exit_code == 0, started.output
    session: dict[str, Any] = json.loads(started.stdout)["session"]
    assert session["namespace"] == NAMESPACE
    got = await kubectl_helmr("--json", "session", "get", session["id"])
    assert json.loads(got.stdout)["id"] == session["id"]


async def test_the_context_namespace_is_where_sessions_start(
    api: Api, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_endpoint(monkeypatch, api, {PROXIED_AUTHORIZATION: f"Bearer {ADMIN}"})
    config = write_kubeconfig(tmp_path, {"token": "t"}, NAMESPACE)
    started = await kubectl_helmr(
        "--kubeconfig", config, "--json", "session", "start", "reviewer", "-w", "ws"
    )
    assert started.exit_code == 0, started.output
    assert json.loads(started.stdout)["session"]["namespace"] == NAMESPACE


async def test_a_request_without_a_token_is_refused(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_endpoint(monkeypatch, api, {})
    refused = await kubectl_helmr("session", "get", "ses_x")
    assert refused.exit_code == 1
    assert "unauthenticated" in refused.stderr


def write_kubeconfig(tmp_path: Path, user: dict[str, str], namespace: str | None = None) -> str:
    ca = tmp_path / "ca.crt"
    ca.write_text("not read until a connection is made")
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://apiserver:6443", "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": context}],
        "current-context": "ctx",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_a_token_kubeconfig_gives_its_token_and_namespace(tmp_path: Path) -> None:
    request = discovery.Request(kubeconfig=write_kubeconfig(tmp_path, {"token": "t0k"}, "team-a"))
    config = discovery.load(request)
    assert config.bearer_token == "t0k"
    assert discovery.context_namespace(request) == "team-a"
    with Apiserver(config) as apiserver:
        assert discovery.helmr_token(config, apiserver, request) == "t0k"


def test_a_certificate_kubeconfig_must_name_a_service_account(tmp_path: Path) -> None:
    for name in ("client.crt", "client.key"):
        (tmp_path / name).write_text("unused")
    user = {
        "client-certificate": str(tmp_path / "client.crt"),
        "client-key": str(tmp_path / "client.key"),
    }
    request = discovery.Request(kubeconfig=write_kubeconfig(tmp_path, user))
    config = discovery.load(request)
    assert config.bearer_token is None
    assert discovery.context_namespace(request) is None
    with (
        Apiserver(config) as apiserver,
        pytest.raises(discovery.DiscoveryError, match="--as-service-account"),
    ):
        discovery.helmr_token(config, apiserver, request)


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(discovery.DiscoveryError, match="cannot use the kubeconfig"):
        discovery.load(discovery.Request(kubeconfig=str(tmp_path / "none")))


def test_service_arguments_name_a_namespace_and_a_name() -> None:
    assert discovery.namespace_and_name("helmr-system/helmr", "--service") == (
        "helmr-system",
        "helmr",
    )
    for wrong in ("helmr", "/helmr", "ns/", "a/b/c"):
        with pytest.raises(Exception, match="NAMESPACE/NAME"):
            discovery.namespace_and_name(wrong, "--service")


def service(ports: list[k8s.V1ServicePort], cluster_ip: str = "10.96.0.20") -> ServiceInfo:
    return service_info(
        k8s.V1Service(
            metadata=k8s.V1ObjectMeta(name="helmr", namespace="helmr-system"),
            spec=k8s.V1ServiceSpec(cluster_ip=cluster_ip, ports=ports),
        )
    )


def test_the_api_port_is_the_one_named_http_and_the_proxy_url_names_it() -> None:
    ports = [k8s.V1ServicePort(name="runner", port=8081), k8s.V1ServicePort(name="http", port=8080)]
    found = discovery.api_service(service(ports))
    assert found == discovery.Service("helmr-system", "helmr", "10.96.0.20", 8080)
    assert discovery.proxy_url("https://apiserver:6443/", found) == (
        "https://apiserver:6443/api/v1/namespaces/helmr-system/services/helmr:http/proxy"
    )
    assert discovery.api_service(service([k8s.V1ServicePort(name="runner", port=8081)])) is None
    headless = discovery.api_service(service(ports, cluster_ip="None"))
    assert headless is not None
    assert not discovery.routable(headless)


def test_routable_means_a_connection_opens() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert discovery.routable(discovery.Service("ns", "helmr", "127.0.0.1", port))
    assert not discovery.routable(discovery.Service("ns", "helmr", "127.0.0.1", port))
