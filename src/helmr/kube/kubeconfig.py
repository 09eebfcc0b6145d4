"""A user's kubeconfig and the few apiserver calls the kubectl plugin makes with it:
its context's namespace and credentials, Services found by label, a service
account's token. Synchronous: the plugin calls these before its event loop runs.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as kube_config

from helmr.kube.errors import translating


class KubeconfigError(Exception):
    """The kubeconfig cannot be used (missing, malformed, no such context)."""


@dataclass(frozen=True)
class Kubeconfig:
    """One context of a kubeconfig, loaded: where the apiserver is and how to call it."""

    configuration: Any
    """The client's configuration, opaque outside this package."""

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    @property
    def bearer_token(self) -> str | None:
        """Its bearer token (static, or from its exec plugin), if it has one."""
        # The loader's key: "BearerToken" in recent clients, "authorization" before.
        keys = self.configuration.api_key
        header = keys.get("BearerToken") or keys.get("authorization") or ""
        scheme, _, token = str(header).partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    def tls(self) -> ssl.SSLContext:
        """Its TLS to the apiserver: its CA, its client certificate if it has one."""
        configuration = self.configuration
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
        if not configuration.verify_ssl:  # insecure-skip-tls-verify: true in the kubeconfig
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def load(path: str | None, context: str | None) -> Kubeconfig:
    """The kubeconfig at ``path`` (None: the usual places), in ``context`` (None: its own)."""
    configuration = k8s.Configuration()
    try:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except kube_config.ConfigException as e:
        raise KubeconfigError(str(e)) from None
    return Kubeconfig(configuration)


def context_namespace(path: str | None, context: str | None) -> str | None:
    """The namespace the context in use names, if any (None without a readable
    kubeconfig: :func:`load` says what is wrong with it)."""
    try:
        contexts, active = kube_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path
        )
    except kube_config.ConfigException:
        return None
    chosen = next((c for c in contexts if c["name"] == context), active)
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return str(namespace) if namespace else None


@dataclass(frozen=True)
class ServiceInfo:
    namespace: str
    name: str
    cluster_ip: str | None
    """None for a headless Service."""
    ports: dict[str, int]
    """Its ports by name."""


def service_info(item: Any) -> ServiceInfo:
    """A Service object of the client as the plugin reads it."""
    ip = item.spec.cluster_ip
    return ServiceInfo(
        namespace=item.metadata.namespace,
        name=item.metadata.name,
        cluster_ip=None if ip in (None, "None") else ip,
        ports={p.name: p.port for p in item.spec.ports or () if p.name},
    )


class Apiserver:
    """The calls the plugin makes, with a kubeconfig's credentials (a context manager:
    the connections close with it). Their refusals are :mod:`helmr.kube.errors`'."""

    def __init__(self, kubeconfig: Kubeconfig) -> None:
        self._api = k8s.ApiClient(kubeconfig.configuration)
        self._core = k8s.CoreV1Api(self._api)

    def __enter__(self) -> Apiserver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def service(self, namespace: str, name: str) -> ServiceInfo:
        return service_info(translating(self._core.read_namespaced_service)(name, namespace))

    def services(self, namespace: str | None, selector: str) -> list[ServiceInfo]:
        """The Services ``selector`` selects in ``namespace`` (None: every namespace)."""
        if namespace:
            listed = translating(self._core.list_namespaced_service)(
                namespace, label_selector=selector
            )
        else:
            listed = translating(self._core.list_service_for_all_namespaces)(
                label_selector=selector
            )
        return [service_info(item) for item in listed.items]

    def service_account_token(self, namespace: str, name: str, seconds: int) -> str:
        """A token of the service account for the apiserver's own audiences."""
        request = k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
        )
        minted = translating(self._core.create_namespaced_service_account_token)(
            name, namespace, request
        )
        status = minted.status
        assert status is not None  # a created TokenRequest carries its token
        assert status.token
        return str(status.token)
