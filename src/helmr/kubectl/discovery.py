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
from typing import Any, Literal

import click
import urllib3
from kubernetes import client as k8s
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from helmr.cli.runtime import UNREACHABLE
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
    try:
        contexts, active = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=request.kubeconfig
        )
    except kube_config.ConfigException:
        return None
    chosen = next((c for c in contexts if c["name"] == request.context), active)
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return str(namespace) if namespace else None


def load(request: Request) -> k8s.Configuration:
    configuration = k8s.Configuration()
    try:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=request.kubeconfig,
            context=request.context,
            client_configuration=configuration,
            persist_config=False,
        )
    except kube_config.ConfigException as e:
        raise DiscoveryError(f"cannot use the kubeconfig: {e}") from None
    return configuration


def api_service(item: Any) -> Service | None:
    """The Service as Helmr's API, or None when it has no ``http`` port."""
    port = next((p.port for p in item.spec.ports or () if p.name == API_PORT), None)
    if port is None:
        return None
    ip = item.spec.cluster_ip
    return Service(
        item.metadata.namespace, item.metadata.name, None if ip in (None, "None") else ip, port
    )


def find_service(core: k8s.CoreV1Api, request: Request) -> Service:
    """The one Helmr Service: the named one, else the only one found."""
    namespace = request.namespace
    if request.service:
        ns, name = namespace_and_name(request.service, "--service")
        try:
            found = api_service(core.read_namespaced_service(name, ns))
        except ApiException as e:
            raise DiscoveryError(f"cannot read Service {ns}/{name}: {e.reason}") from None
        if found is None:
            raise DiscoveryError(f"Service {ns}/{name} has no port named {API_PORT!r}")
        return found
    searched, forbidden = [], False
    candidates: list[Service] = []
    for scope in ([namespace] if namespace else []) + [None]:
        searched.append(scope or "every namespace")
        try:
            items = (
                core.list_namespaced_service(scope, label_selector=SERVICE_SELECTOR).items
                if scope
                else core.list_service_for_all_namespaces(label_selector=SERVICE_SELECTOR).items
            )
        except ApiException as e:
            if e.status != 403:
                raise DiscoveryError(f"cannot list Services: {e.reason}") from None
            forbidden = True
            continue
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


def kubeconfig_token(configuration: k8s.Configuration) -> str | None:
    """The kubeconfig's bearer token (static, or from its exec plugin), if any."""
    # The loader's key: "BearerToken" in recent clients, "authorization" before.
    keys = configuration.api_key
    header = keys.get("BearerToken") or keys.get("authorization") or ""
    scheme, _, token = str(header).partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def mint_token(core: k8s.CoreV1Api, service_account: str) -> str:
    """A token of ``service_account`` for the apiserver's own audiences, which is
    what Helmr's TokenReview accepts (it names no audience)."""
    ns, name = namespace_and_name(service_account, "--as-service-account")
    try:
        minted = core.create_namespaced_service_account_token(
            name,
            ns,
            k8s.AuthenticationV1TokenRequest(
                spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS)
            ),
        )
    except ApiException as e:
        raise DiscoveryError(
            f"cannot mint a token for service account {ns}/{name}: {e.reason} "
            "(needs create on serviceaccounts/token there)"
        ) from None
    status = minted.status
    assert status is not None  # a created TokenRequest carries its token
    assert status.token
    return status.token


def helmr_token(configuration: k8s.Configuration, core: k8s.CoreV1Api, request: Request) -> str:
    if request.service_account:
        return mint_token(core, request.service_account)
    token = kubeconfig_token(configuration)
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


def apiserver_tls(configuration: k8s.Configuration) -> ssl.SSLContext:
    """The kubeconfig's TLS: its CA, its client certificate if it has one."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:  # insecure-skip-tls-verify: true in the kubeconfig
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def proxy_url(host: str, service: Service) -> str:
    return (
        f"{host.rstrip('/')}/api/v1/namespaces/{service.namespace}"
        f"/services/{service.name}:{API_PORT}/proxy"
    )


def endpoint(request: Request) -> Endpoint:
    """The way to the Helmr API that ``request`` describes."""
    configuration = load(request)
    try:
        with k8s.ApiClient(configuration) as api:
            core = k8s.CoreV1Api(api)
            service = find_service(core, request)
            token = helmr_token(configuration, core, request)
    except urllib3.exceptions.HTTPError as e:
        raise DiscoveryError(f"cannot reach the apiserver at {configuration.host}: {e}") from None
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
    apiserver_token = kubeconfig_token(configuration)
    if apiserver_token:
        headers["Authorization"] = f"Bearer {apiserver_token}"
    return Endpoint(
        proxy_url(configuration.host, service),
        headers,
        apiserver_tls(configuration),
        f"{where} through the apiserver at {configuration.host}",
    )
