"""What an Actor's runner pods may reach beyond the defaults: ``spec.network``.

A runner pod runs untrusted agent code, so by default it reaches only the
cluster's DNS and the control plane's runner API (NetworkPolicies the operator
writes: ``helmr.operator.runners.network_policies``). An Actor opens more,
explicitly, by CIDR and port. The cloud metadata addresses stay closed inside
any CIDR that contains them unless an entry names one exactly (a /32 or /128):
the operator writes them as the ipBlock's ``except``.

By hostname (``egressHosts``), through the chart's egress proxy (``helmr.egress``):
a NetworkPolicy names addresses, and those behind a name change.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from helmr.resources.base import WireModel, cel, rules

CIDR_MAX = len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")


def _cidr(value: str) -> str:
    # The apiserver checks the canonical form by CEL; Python only that it parses,
    # so that an Actor the apiserver admitted is never one the operator cannot read.
    try:
        if "/" not in value:
            raise ValueError("no prefix length")
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR with its host bits zero: {exc}") from None
    return value


Cidr = Annotated[
    str,
    Field(
        min_length=1,
        max_length=CIDR_MAX,
        json_schema_extra=rules(
            cel("isCIDR(self)", "must be a CIDR, such as 203.0.113.0/24 or 2001:db8::/32"),
            cel(
                "!isCIDR(self) || string(cidr(self).masked()) == self",
                "must be written as its network address in canonical form"
                " (host bits zero, IPv6 in lower case and shortened: 10.0.0.0/8, not 10.1.2.3/8)",
            ),
        ),
    ),
    AfterValidator(_cidr),
]


class EgressPort(WireModel):
    """A destination port runner pods may connect to."""

    port: int = Field(ge=1, le=65535, description="The port number, 1 to 65535.")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(
        default="TCP", description="`TCP` (the default), `UDP` or `SCTP`."
    )


class EgressRule(WireModel):
    """Destinations runner pods may reach: a CIDR, on some ports or all."""

    cidr: Cidr = Field(
        description=(
            "The addresses, as a CIDR (`203.0.113.0/24`, `2001:db8::/32`; one address:"
            " `/32` or `/128`). The cloud metadata addresses (169.254.169.254,"
            " fd00:ec2::254) inside it stay closed unless the CIDR is exactly one of them."
        )
    )
    ports: list[EgressPort] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="Ports at those addresses. Unset: every port.",
    )


class RunnerNetwork(WireModel):
    """Network access of the Actor's runner pods beyond DNS and the control plane."""

    egress: list[EgressRule] | None = Field(
        default=None,
        max_length=32,
        description=(
            "Destinations runner pods may connect to, besides the cluster's DNS and the"
            " control plane's runner API (always allowed). Unset: nothing else."
        ),
    )
    egress_hosts: list[EgressHost] | None = Field(
        default=None,
        max_length=64,
        description=(
            "Hostnames runner pods may reach through the chart's egress proxy (HTTP"
            " CONNECT and plain HTTP; its `egressProxy` values): their pods get"
            " `HTTPS_PROXY` and `HTTP_PROXY`, and may connect to the proxy, which lets"
            " each request through only to these hosts. The proxy refuses a name that"
            " resolves to a private, loopback or link-local address (the metadata"
            " addresses among them) unless an `egress` CIDR contains it. Unset: none."
        ),
    )


HTTPS_PORT = 443
"""The port of an ``egressHosts`` entry that names none."""
HOST_MAX = 253
HOST_PATTERN = r"^(\*\.)?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A fully qualified DNS name in lower case, optionally behind ``*.``; its last label
starts with a letter, so that an IP address is never a host (addresses are ``egress``'s)."""


class EgressHost(WireModel):
    """A hostname runner pods may reach through the egress proxy, on some ports."""

    host: str = Field(
        min_length=1,
        max_length=HOST_MAX,
        pattern=HOST_PATTERN,
        description=(
            "A fully qualified DNS name in lower case (`api.openai.com`), or `*.` and a"
            " name (`*.example.com`: every name below example.com, not example.com"
            " itself). Not an IP address: allow addresses by `egress`."
        ),
    )
    ports: list[Annotated[int, Field(ge=1, le=65535, description="A TCP port.")]] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="TCP ports on that host, 1 to 65535. Unset: 443 alone.",
    )

    @property
    def allowed_ports(self) -> tuple[int, ...]:
        return tuple(self.ports) if self.ports else (HTTPS_PORT,)
