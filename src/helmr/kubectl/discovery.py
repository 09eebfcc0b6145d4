"""From a kubeconfig to the Helmr API: which Service, which route, which token.

The chart labels its Service ``app.kubernetes.io/part-of=helmr`` and
``app.kubernetes.io/component=control-plane``; that is what is looked for,
first in the namespace the user gave (or the context's), then in every
namespace. The Service's ClusterIP is used when this machine can open a
connection to it (a laptop usually cannot); otherwise the request goes through
the apiserver's Service proxy (``.../services/NAME:http/proxy/...``), which
carries plain HTTP, long polls and the event stream alike.

The apiserver consumes the ``Authorization`` header of a proxied request, so
the Helmr token travels in ``PROXIED_AUTHORIZATION``. That token is the
kubeconfig's own bearer token, or, for a kubeconfig that authenticates with a
client certificate (which Helmr's TokenReview cannot check), a token the
TokenRequest API mints for a service account the user names.

The Kubernetes client is synchronous: this runs before the command's event loop.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Literal

import click
import urllib3

from helmr.cli.runtime import UNREACHABLE
from helmr.kube import kubeconfig
from helmr.kube.errors import Forbidden, KubeError
from helmr.kube.kubeconfig import Apiserver, Kubeconfig, KubeconfigError, ServiceInfo
from helmr.protocol.api_routes import PROXIED_AUTHORIZATION

SERVICE_SELECTOR = "app.kubernetes.io/part-of=helmr,app.kubernetes.io/component=control-plane"
API_PORT = "http"  # the chart's name for the public API's Service port
TOKEN_SECONDS = 3600  # a minted token's life: `kubectl create token`'s default
CONNECT_PROBE_SECONDS = 0.5  # how long a direct connection may take to count as routable

Route = Literal["auto", "direct", "apiserver"]


class DiscoveryError(click.ClickException):
    """No way to the Helmr API from this kubeconfig; the message says what to give."""

    exit_code = UNREACHABLE


@dataclass(frozen=True)
class Request:
    """What the user asked for on the command line."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    service: str | None = None  # NAMESPACE/NAME, skipping the search
    service_account: str | None = None  # NAMESPACE/NAME to mint a token for
    route: Route = "auto"


@dataclass(frozen=True)
class Endpoint:
    """How to call the Helmr API: the base URL, headers for every request, TLS."""

    url: str
    headers: dict[str, str]
    ssl: ssl.SSLContext | None
    description: str


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    cluster_ip: str | None
    port: int


def namespace_and_name(value: str, option: str) -> tuple[str, str]:
    namespace, slash, name = value.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise click.BadParameter(f"{option} takes NAMESPACE/NAME, got {value!r}")
    return namespace, name


def context_namespace(request: Request) -> str | None:
    """The namespace of the kubeconfig context in use, if it names one (None
    without a readable kubeconfig: ``load`` says what is wrong with it)."""
    return kubeconfig.context_namespace(request.kubeconfig, request.context)


def load(request: Request) -> Kubeconfig:
    try:
        return kubeconfig.load(request.kubeconfig, request.context)
    except KubeconfigError as e:
        raise DiscoveryError(f"cannot use the kubeconfig: {e}") from None


def api_service(found: ServiceInfo) -> Service | None:
    """The Service as Helmr's API, or None when it has no ``http`` port."""
    port = found.ports.get(API_PORT)
    if port is None:
        return None
    return Service(found.namespace, found.name, found.cluster_ip, port)


def find_service(apiserver: Apiserver, request: Request) -> Service:
    """The one Helmr Service: the named one, else the only one found."""
    namespace = request.namespace
    if request.service:
        ns, name = namespace_and_name(request.service, "--service")
        try:
            found = api_service(apiserver.service(ns, name))
        except KubeError as e:
            raise DiscoveryError(f"cannot read Service {ns}/{name}: {e.reason}") from None
        if found is None:
            raise DiscoveryError(f"Service {ns}/{name} has no port named {API_PORT!r}")
        return found
    searched, forbidden = [], False
    candidates: list[Service] = []
    for scope in ([namespace] if namespace else []) + [None]:
        searched.append(scope or "every namespace")
        try:
            items = apiserver.services(scope, SERVICE_SELECTOR)
        except Forbidden:
            forbidden = True
            continue
        except KubeError as e:
            raise DiscoveryError(f"cannot list Services: {e.reason}") from None
        candidates = [s for s in map(api_service, items) if s is not None]
        if candidates:
            break
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        names = ", ".join(f"{s.namespace}/{s.name}" for s in candidates)
        raise DiscoveryError(f"several Helmr Services ({names}); choose one with --service")
    hint = " (listing some was forbidden)" if forbidden else ""
    raise DiscoveryError(
        f"no Helmr Service (labels {SERVICE_SELECTOR}) in {' or '.join(searched)}{hint}; "
        "name it with --service NAMESPACE/NAME, or the namespace it is in with -n"
    )


def mint_token(apiserver: Apiserver, service_account: str) -> str:
    """A token of ``service_account`` for the apiserver's own audiences, which is
    what Helmr's TokenReview accepts (it names no audience)."""
    ns, name = namespace_and_name(service_account, "--as-service-account")
    try:
        return apiserver.service_account_token(ns, name, TOKEN_SECONDS)
    except KubeError as e:
        raise DiscoveryError(
            f"cannot mint a token for service account {ns}/{name}: {e.reason} "
            "(needs create on serviceaccounts/token there)"
        ) from None


def helmr_token(config: Kubeconfig, apiserver: Apiserver, request: Request) -> str:
    if request.service_account:
        return mint_token(apiserver, request.service_account)
    token = config.bearer_token
    if token is None:
        raise DiscoveryError(
            "this kubeconfig has no bearer token (it authenticates with a client certificate, "
            "which Helmr cannot check); act as a service account: "
            "--as-service-account NAMESPACE/NAME"
        )
    return token


def routable(service: Service) -> bool:
    """Whether this machine reaches the ClusterIP directly (in the cluster, or on a node)."""
    if service.cluster_ip is None:
        return False
    try:
        socket.create_connection((service.cluster_ip, service.port), CONNECT_PROBE_SECONDS).close()
    except OSError:
        return False
    return True


def proxy_url(host: str, service: Service) -> str:
    return (
        f"{host.rstrip('/')}/api/v1/namespaces/{service.namespace}"
        f"/services/{service.name}:{API_PORT}/proxy"
    )


def endpoint(request: Request) -> Endpoint:
    """The way to the Helmr API that ``request`` describes."""
    config = load(request)
    try:
        with Apiserver(config) as apiserver:
            service = find_service(apiserver, request)
            token = helmr_token(config, apiserver, request)
    except urllib3.exceptions.HTTPError as e:
        raise DiscoveryError(f"cannot reach the apiserver at {config.host}: {e}") from None
    where = f"Service {service.namespace}/{service.name}"
    if request.route == "direct" or (request.route == "auto" and routable(service)):
        if service.cluster_ip is None:
            raise DiscoveryError(f"{where} has no ClusterIP to reach directly")
        return Endpoint(
            f"http://{service.cluster_ip}:{service.port}",
            {"Authorization": f"Bearer {token}"},
            None,
            f"{where} at {service.cluster_ip}:{service.port}",
        )
    headers = {PROXIED_AUTHORIZATION: f"Bearer {token}"}
    apiserver_token = config.bearer_token
    if apiserver_token:
        headers["Authorization"] = f"Bearer {apiserver_token}"
    return Endpoint(
        proxy_url(config.host, service),
        headers,
        config.tls(),
        f"{where} through the apiserver at {config.host}",
    )
