"""The control plane's settings, read once from ``HELMR_*`` environment variables.

The Helm chart sets these (charts/helmr/templates/deployment.yaml); each has
a default that suits a local run. pydantic-settings reads and validates them,
so a malformed value stops the operator at start with the variable's name.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from helmr.logs import LogFormat

_API_PORT = 8080
HISTORY_RETENTION = timedelta(days=30)
"""The Environment's history retention unless configured (``helmr dev``'s too)."""
KUBE_DNS: dict[str, Any] = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    # Port 53, or the DNS pods' ports named as CoreDNS and kube-dns name them,
    # whatever their number (a Service's 53 may be a pod's 1053).
    "ports": [
        {"port": 53, "protocol": "UDP"},
        {"port": 53, "protocol": "TCP"},
        {"port": "dns", "protocol": "UDP"},
        {"port": "dns-tcp", "protocol": "TCP"},
    ],
}
"""The egress rule to the cluster's DNS: CoreDNS or kube-dns pods in kube-system."""
METADATA_ADDRESSES = ("169.254.169.254", "fd00:ec2::254")
"""The cloud metadata endpoints (AWS, GCP and Azure's IPv4 one; AWS's IPv6 one)."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HELMR_", frozen=True, validate_by_name=True)

    store_path: Path = Path("/var/lib/helmr/helmr.db")
    """The timeline store (SQLite); the runner-token key lives beside it."""
    store_url: str = ""
    """A ``postgresql://`` URL: the timeline store is that database, which several
    replicas may share (the chart's ``store.postgres``). Empty: SQLite at ``store_path``."""
    listen_host: str = "0.0.0.0"
    api_port: int = _API_PORT
    runner_port: int = _API_PORT
    """Both ports serve the same app; a separate runner port lets a NetworkPolicy
    admit only runner pods to it. Unset: the API port."""
    runner_url: str = f"http://helmr.helmr-system.svc:{_API_PORT}"
    """The URL runner pods reach this process at. Unset: the in-cluster Service
    at the runner port."""
    runner_node_selector: dict[str, str] = Field(default_factory=dict)
    """JSON: the runner pods' ``nodeSelector`` (the chart's ``runner.nodeSelector``)."""
    runner_tolerations: tuple[dict[str, Any], ...] = ()
    """JSON: the runner pods' ``tolerations`` (the chart's ``runner.tolerations``)."""
    runner_network_policy: bool = True
    """Whether runner pods are contained by the NetworkPolicies this process writes
    (helmr.operator.runners.network_policies). Off: the cluster's administrators
    contain them their own way."""
    control_plane_peers: tuple[dict[str, Any], ...] = ()
    """JSON: NetworkPolicy peers that are this control plane, which runner pods may
    reach at the runner port and be reached by (the chart: its pods, by namespace
    and labels). Unset: the runner URL's host when it is an IP address, else the
    control-plane pods of a default release (``helmr`` in ``helmr-system``)."""
    runner_dns: dict[str, Any] = Field(default_factory=lambda: dict(KUBE_DNS))
    """JSON: the NetworkPolicy egress rule (``to``, ``ports``) by which runner pods
    reach the cluster's DNS."""
    runner_metadata_addresses: Annotated[tuple[str, ...], NoDecode] = METADATA_ADDRESSES
    """Comma-separated IP addresses kept closed inside every CIDR an Actor's
    ``spec.network.egress`` allows, unless an entry names one exactly."""
    egress_proxy_url: str = ""
    """The chart's egress proxy (``http://<host>:<port>``), which runner pods of Actors
    naming ``spec.network.egressHosts`` are given as ``HTTPS_PROXY`` and ``HTTP_PROXY``
    and may connect to. Empty: no proxy; such Actors' hosts stay unreachable."""
    egress_proxy_peers: tuple[dict[str, Any], ...] = ()
    """JSON: NetworkPolicy peers that are the egress proxy's pods (the chart: by
    namespace and labels). Unset: the proxy URL's host when it is an IP address."""
    egress_proxy_port: int = 3128
    """The port the proxy's pods listen on (behind any Service's translation)."""
    watch_namespaces: Annotated[tuple[str, ...], NoDecode] = ()
    """Comma-separated. Empty: every namespace. Otherwise pods are listed per
    namespace (namespaced RBAC)."""
    history_retention: timedelta = Field(
        default=HISTORY_RETENTION, validation_alias="HELMR_HISTORY_RETENTION_SECONDS"
    )
    """The Environment's history retention: payloads and events older than this expire."""
    max_execution_losses: int = 3
    stop_grace: timedelta = Field(
        default=timedelta(seconds=10), validation_alias="HELMR_STOP_GRACE_SECONDS"
    )
    """How long a runner process has to let go of an interrupted Turn before it is
    stopped and that counts as a process failure (``stop_deadline_elapsed``)."""
    max_request_bytes: int = 1 << 20
    auth: str = "kubernetes"
    """``kubernetes`` (TokenReview + SubjectAccessReview) or ``static:<token>`` for development."""
    reconcile_interval: float = 1.0
    """Seconds between supervisor passes when nothing wakes it sooner, and the least
    between two passes over every Workspace's saves (``Disks``)."""
    preparation_timeout: timedelta = Field(
        default=timedelta(minutes=5), validation_alias="HELMR_PREPARATION_TIMEOUT_SECONDS"
    )
    """How long a new runner pod may take to start its container (scheduling, image
    pull) before that preparation counts as failed and is retried per the Actor's ``retry``."""
    actor_grace: timedelta = Field(
        default=timedelta(seconds=30), validation_alias="HELMR_ACTOR_GRACE_SECONDS"
    )
    """How long a Session waits for its Actor to exist before it fails (``actor_not_found``)."""
    log_format: LogFormat = "text"
    """``json`` (one object a line, for collectors; the chart's default) or ``text``
    (for people running ``kopf run`` by hand); runner pods log the same way."""
    leader_lease: str = ""
    """``namespace/name`` of the ``coordination.k8s.io`` Lease the replicas elect
    their leader by (helmr.operator.leadership.leader). Empty: no election, this process
    leads (one replica only)."""
    leader_lease_seconds: float = 15.0
    """The Lease's duration: a leader lost is replaced within it (plus a retry)."""
    turn_events: bool = True
    """Whether each Turn's outcome is also a Kubernetes Event on its Session (one
    apiserver write per Turn); off, Events tell only of holds, losses and closes."""
    api_turn_resources: bool = True
    """Whether a Turn the REST API admitted is also a Turn resource, with its status
    and its Kubernetes Event (a create, kopf's patch and status patches per Turn).
    Off, the API and the timeline are its only record, and a Session's writes do
    not grow with its Turns; a Turn applied with kubectl always gets its status."""
    status_interval: float = 0.5
    """Seconds between the status mirror's passes: every change within one is one
    status patch per object. A status someone waits for (a new Session, a Turn
    applied with kubectl) does not wait for it."""

    @field_validator("watch_namespaces", "runner_metadata_addresses", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return tuple(n for n in value.split(",") if n) if isinstance(value, str) else value

    @field_validator("runner_metadata_addresses")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(ipaddress.ip_address(address.strip())) for address in value)

    @field_validator(
        "history_retention", "stop_grace", "preparation_timeout", "actor_grace", mode="before"
    )
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return timedelta(seconds=float(value)) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        # The runner port defaults to the API port, and the runner URL to the runner port.
        if isinstance(data, dict):
            data.setdefault("runner_port", data.get("api_port", _API_PORT))
            data.setdefault("runner_url", f"http://helmr.helmr-system.svc:{data['runner_port']}")
        return data
