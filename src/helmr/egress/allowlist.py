"""What one Actor's runners may reach through the egress proxy, decided purely.

:class:`Allowance` is an Actor's ``spec.network`` as the proxy reads it: the hosts
and ports it names, and the CIDRs whose private addresses it may reach. Each check
answers with a refusal (a sentence for the proxy's 403) or the address to use.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from helmr.resources.runner_network import RunnerNetwork

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(Exception):
    """A request the proxy does not let through; the message says why."""


@dataclass(frozen=True, slots=True)
class Allowance:
    hosts: tuple[tuple[str, tuple[int, ...]], ...]
    """``(host or *.name, ports)`` as the Actor names them."""
    networks: tuple[Network, ...]
    """The Actor's ``egress`` CIDRs: private addresses inside them may be reached."""

    @classmethod
    def of(cls, network: RunnerNetwork | None) -> Allowance:
        if network is None:
            return NOTHING
        return cls(
            hosts=tuple((h.host, h.allowed_ports) for h in network.egress_hosts or ()),
            networks=tuple(ipaddress.ip_network(rule.cidr) for rule in network.egress or ()),
        )

    def check_host(self, host: str, port: int) -> None:
        """Refuses unless some entry names ``host`` (or a ``*.`` entry covers it) on ``port``."""
        name = host.rstrip(".").lower()
        ports = {p for pattern, allowed in self.hosts if matches(pattern, name) for p in allowed}
        if not ports:
            raise Refused(f"{name} is not among the hosts the Actor allows (egressHosts)")
        if port not in ports:
            raise Refused(
                f"{name} is allowed on port {', '.join(map(str, sorted(ports)))}, not {port}"
            )

    def choose_address(self, name: str, addresses: Iterable[str], metadata: Sequence[str]) -> str:
        """The first of ``name``'s ``addresses`` the Actor may reach; refuses if none."""
        seen = []
        for text in addresses:
            address = _unmapped(ipaddress.ip_address(text))
            if self.admits(address, metadata):
                return str(address)
            seen.append(str(address))
        raise Refused(
            f"{name} resolves to {', '.join(seen) or 'nothing'}: not a public address,"
            " and no egress CIDR of the Actor contains it"
        )

    def admits(self, address: Address, metadata: Sequence[str]) -> bool:
        """A public address, or one inside an ``egress`` CIDR; a metadata address only
        when a CIDR is exactly it (as the NetworkPolicies except it)."""
        if str(address) in metadata:
            return any(n.num_addresses == 1 and address in n for n in self.networks)
        return address.is_global or any(address in n for n in self.networks)


NOTHING = Allowance(hosts=(), networks=())


def matches(pattern: str, name: str) -> bool:
    """``api.example.com`` matches itself; ``*.example.com`` every name below it."""
    if pattern.startswith("*."):
        return name.endswith(pattern[1:]) and len(name) > len(pattern) - 1
    return name == pattern


def _unmapped(address: Address) -> Address:
    # An IPv4 address written as IPv6 (::ffff:10.0.0.1) is checked as what it is.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
