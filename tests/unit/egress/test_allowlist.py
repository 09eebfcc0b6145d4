"""What an Actor's runners may reach through the egress proxy: hosts, ports, addresses."""

from __future__ import annotations

import ipaddress

import pytest

from helmr.egress.allowlist import Allowance, Refused, matches
from helmr.resources.runner_network import RunnerNetwork

METADATA = ("169.254.169.254", "fd00:ec2::254")


def allowance(**network: object) -> Allowance:
    return Allowance.of(RunnerNetwork.model_validate(network))


@pytest.mark.parametrize(
    ("pattern", "name", "matched"),
    [
        ("api.example.com", "api.example.com", True),
        ("api.example.com", "x.api.example.com", False),
        ("*.example.com", "api.example.com", True),
        ("*.example.com", "a.b.example.com", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "badexample.com", False),
    ],
)
def test_a_host_or_every_name_below_one(pattern: str, name: str, matched: bool) -> None:
    assert matches(pattern, name) is matched


def test_a_named_host_on_its_ports() -> None:
    allowed = allowance(
        egressHosts=[{"host": "api.example.com"}, {"host": "*.x.dev", "ports": [80]}]
    )
    allowed.check_host("api.example.com", 443)
    allowed.check_host("API.Example.com.", 443)  # as DNS compares names
    allowed.check_host("a.x.dev", 80)
    with pytest.raises(Refused, match="allowed on port 443, not 80"):
        allowed.check_host("api.example.com", 80)
    with pytest.raises(Refused, match=r"other\.example\.com is not among the hosts"):
        allowed.check_host("other.example.com", 443)
    with pytest.raises(Refused, match="not among the hosts"):
        allowance().check_host("api.example.com", 443)


def test_public_addresses_and_those_inside_an_egress_cidr() -> None:
    allowed = allowance(egress=[{"cidr": "10.96.0.0/12"}])
    assert allowed.choose_address("h", ["10.0.0.1", "93.184.215.14"], METADATA) == "93.184.215.14"
    assert allowed.choose_address("h", ["10.96.0.10"], METADATA) == "10.96.0.10"
    assert allowed.choose_address("h", ["::ffff:10.96.0.10"], METADATA) == "10.96.0.10"


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "::1",
        "169.254.1.1",
        "100.64.0.1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "169.254.169.254",
    ],
)
def test_private_loopback_link_local_and_metadata_addresses_are_refused(address: str) -> None:
    with pytest.raises(Refused, match=r"h resolves to .*: not a public address"):
        allowance().choose_address("h", [address], METADATA)


def test_a_metadata_address_only_when_a_cidr_is_exactly_it() -> None:
    inside = allowance(egress=[{"cidr": "169.254.0.0/16"}, {"cidr": "0.0.0.0/0"}])
    with pytest.raises(Refused):
        inside.choose_address("h", ["169.254.169.254"], METADATA)
    assert inside.choose_address("h", ["169.254.1.1"], METADATA) == "169.254.1.1"
    named = allowance(egress=[{"cidr": "169.254.169.254/32"}])
    assert named.choose_address("h", ["169.254.169.254"], METADATA) == "169.254.169.254"


def test_an_actor_without_network_settings_allows_nothing() -> None:
    assert Allowance.of(None) == Allowance(hosts=(), networks=())
    assert allowance(egress=[{"cidr": "10.0.0.0/8"}]).networks == (
        ipaddress.ip_network("10.0.0.0/8"),
    )
