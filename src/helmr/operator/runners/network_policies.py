"""The NetworkPolicies that contain runner pods, and who writes them.

Agent code is untrusted, so a runner pod reaches nothing by default but the
cluster's DNS and the control plane's runner API, and nothing reaches it but
the control plane. Two kinds of policy say so, both written by the operator
(server-side apply) before it creates a runner pod:

- ``helmr-runners``, one per namespace it starts runners in, selecting every
  runner pod there: ingress from the control plane only; egress to DNS and to
  the control plane's runner port only. Owned by nothing (as the runner service
  account): a runner pod whose Actor is deleted while it runs stays contained.
- ``helmr-runners-<actor>``, one per Actor, owned by it (garbage-collected with
  it), selecting that Actor's runner pods by ``helmr.dev/actor``: the egress its
  ``spec.network.egress`` allows, with the cloud metadata addresses excepted
  from every CIDR that contains them unless the entry names one exactly; and the
  egress proxy's port if it names ``spec.network.egressHosts`` (the proxy alone
  checks the hostname: ``helmr.egress``).

NetworkPolicies add up: a pod selected by both may do what either allows. The
operator, not the chart, writes them because it serves namespaces created after
the install, and an Actor's policy follows the Actor.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from helmr.kube.client import Kube
from helmr.kube.labels import LABEL_ACTOR, LABEL_COMPONENT, RUNNER
from helmr.operator.settings import Settings
from helmr.resources import Actor
from helmr.resources.runner_network import EgressRule

BASELINE = "helmr-runners"
"""The namespace's policy of every runner pod."""
MANAGED_BY = {"app.kubernetes.io/managed-by": "helmr"}

Peer = dict[str, Any]
"""A NetworkPolicyPeer, as Kubernetes writes it."""


@dataclass(frozen=True, slots=True)
class Containment:
    """What every runner pod may reach, and what stays closed inside an Actor's CIDRs."""

    control_plane: tuple[Peer, ...]
    """The control plane's pods (or addresses): whom runners reach, and who reaches them."""
    runner_port: int
    """The port the control plane serves the runner API on (after any Service's
    translation: the pod's own port)."""
    dns: dict[str, Any]
    """The egress rule (``to`` and ``ports``) that reaches the cluster's DNS."""
    metadata_addresses: tuple[str, ...]
    """Cloud metadata addresses excepted from every CIDR an Actor allows, unless
    named exactly."""
    egress_proxy: tuple[Peer, ...] = ()
    """The egress proxy's pods (or address), which runner pods of Actors naming
    hostnames may reach at ``egress_proxy_port``; empty: no proxy."""
    egress_proxy_port: int = 0


def actor_policy_name(actor_name: str) -> str:
    return f"{BASELINE}-{actor_name}"


def address_peer(url: str) -> Peer | None:
    """The peer that is the host of ``url`` when it is an IP address (an ipBlock of
    that one address), else None."""
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return {"ipBlock": {"cidr": str(ipaddress.ip_network(address))}}


DEFAULT_RELEASE: Peer = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "helmr-system"}},
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/name": "helmr",
            "app.kubernetes.io/component": "control-plane",
        }
    },
}
"""The control-plane pods of the chart's default release, which the default runner
URL (``helmr.helmr-system.svc``) reaches."""


def containment(settings: Settings) -> Containment | None:
    """What runner pods may reach, as the settings say; None: no policies."""
    if not settings.runner_network_policy:
        return None
    peers = settings.control_plane_peers or (address_peer(settings.runner_url) or DEFAULT_RELEASE,)
    proxy: tuple[Peer, ...] = ()
    if settings.egress_proxy_url:
        proxy = settings.egress_proxy_peers or tuple(
            peer for peer in (address_peer(settings.egress_proxy_url),) if peer is not None
        )
    return Containment(
        control_plane=peers,
        runner_port=settings.runner_port,
        dns=settings.runner_dns,
        metadata_addresses=settings.runner_metadata_addresses,
        egress_proxy=proxy,
        egress_proxy_port=settings.egress_proxy_port,
    )


def build_baseline_policy_spec(namespace: str, containment: Containment) -> dict[str, Any]:
    """The namespace's ``helmr-runners``: runner pods talk to DNS and the control
    plane, and hear only from the control plane."""
    control_plane = list(containment.control_plane)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": BASELINE, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_COMPONENT: RUNNER}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": control_plane}],
            "egress": [
                containment.dns,
                {
                    "to": control_plane,
                    "ports": [{"port": containment.runner_port, "protocol": "TCP"}],
                },
            ],
        },
    }


def excepted_metadata(cidr: str, metadata_addresses: Sequence[str]) -> list[str]:
    """The metadata addresses inside ``cidr``, as one-address CIDRs, unless ``cidr``
    is exactly one of them (an entry naming it opens it)."""
    network = ipaddress.ip_network(cidr)
    excepted = []
    for text in metadata_addresses:
        address = ipaddress.ip_address(text)
        if address.version != network.version or address not in network:
            continue
        if network.prefixlen < network.max_prefixlen:
            excepted.append(str(ipaddress.ip_network(address)))
    return excepted


def _egress_rule(rule: EgressRule, metadata_addresses: Sequence[str]) -> dict[str, Any]:
    block: dict[str, Any] = {"cidr": rule.cidr}
    if excepted := excepted_metadata(rule.cidr, metadata_addresses):
        block["except"] = excepted
    out: dict[str, Any] = {"to": [{"ipBlock": block}]}
    if rule.ports:
        out["ports"] = [{"port": p.port, "protocol": p.protocol} for p in rule.ports]
    return out


def _proxy_rule(containment: Containment) -> dict[str, Any]:
    return {
        "to": list(containment.egress_proxy),
        "ports": [{"port": containment.egress_proxy_port, "protocol": "TCP"}],
    }


def build_actor_policy_spec(actor: Actor, containment: Containment) -> dict[str, Any]:
    """The Actor's ``helmr-runners-<actor>``: the egress its ``spec.network`` allows
    its runner pods (none: a policy that adds nothing to the namespace's), and the
    egress proxy if it names hostnames and there is one."""
    name = actor.metadata.name or ""
    network = actor.spec.network
    rules = network.egress if network is not None and network.egress else []
    egress = [_egress_rule(rule, containment.metadata_addresses) for rule in rules]
    if network is not None and network.egress_hosts and containment.egress_proxy:
        egress.append(_proxy_rule(containment))
    owner = actor.owner_reference().model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": actor_policy_name(name),
            "namespace": actor.metadata.namespace,
            "labels": MANAGED_BY | {LABEL_ACTOR: name},
            # Deleting the Actor garbage-collects it; the namespace's policy remains.
            "ownerReferences": [owner | {"controller": True}],
        },
        "spec": {
            "podSelector": {"matchLabels": {LABEL_COMPONENT: RUNNER, LABEL_ACTOR: name}},
            "policyTypes": ["Egress"],
            "egress": egress,
        },
    }


class RunnerPolicies:
    """Writes the policies of an Actor's runner pods (the namespace's and its own),
    once per Actor generation in this process: when the Actor is created or changed,
    and before each runner pod unless they are written already.

    Keyed by the Actor's uid, so a namespace deleted and made again (its Actors are
    new objects) gets its ``helmr-runners`` again. A policy someone deletes by hand
    is written again when the operator restarts or the Actor changes.
    """

    def __init__(self, kube: Kube, containment: Containment | None) -> None:
        """``containment`` None: this process writes no policy (the cluster's
        administrators contain runner pods their own way)."""
        self.kube = kube
        self.containment = containment
        self._written: dict[tuple[str, str], tuple[str, int]] = {}

    async def ensure(self, actor: Actor) -> None:
        """Makes sure the policies of ``actor``'s runner pods are in place, as its
        current generation says."""
        if self.containment is None:
            return
        namespace, name = actor.metadata.namespace or "", actor.metadata.name or ""
        version = (actor.metadata.uid or "", actor.metadata.generation or 0)
        if self._written.get((namespace, name)) == version:
            return
        await self.kube.apply_network_policy(
            build_baseline_policy_spec(namespace, self.containment)
        )
        body = build_actor_policy_spec(actor, self.containment)
        await self.kube.apply_network_policy(body)
        self._written[(namespace, name)] = version
