"""The NetworkPolicies that contain runner pods, built purely: the namespace's
(DNS and the runner API only, ingress from the control plane only) and each
Actor's (its ``spec.network.egress``, metadata addresses excepted unless named);
and when the operator writes them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from helmr.operator.runners import network_policies as policies
from helmr.operator.runners import pods
from helmr.operator.settings import KUBE_DNS, METADATA_ADDRESSES, Settings
from helmr.resources import Actor
from tests.unit.operator.test_volumes import _runner_spec as runner_spec

NODE = {"ipBlock": {"cidr": "192.0.2.2/32"}}
CONTAINMENT = policies.Containment(
    control_plane=(NODE,), runner_port=8081, dns=KUBE_DNS, metadata_addresses=METADATA_ADDRESSES
)


def actor_of(network: dict[str, Any] | None = None, *, generation: int = 1) -> Actor:
    spec: dict[str, Any] = {"image": "runner:dev", "entrypoint": "echo.echo:echo"}
    if network is not None:
        spec["network"] = network
    return Actor.from_manifest(
        {
            "apiVersion": "helmr.dev/v1alpha1",
            "kind": "Actor",
            "metadata": {
                "name": "echo",
                "namespace": "team",
                "uid": "uid-a",
                "generation": generation,
            },
            "spec": spec,
        }
    )


def egress_of(*rules: dict[str, Any]) -> list[dict[str, Any]]:
    actor = actor_of({"egress": list(rules)})
    return list(policies.build_actor_policy_spec(actor, CONTAINMENT)["spec"]["egress"])


def test_the_namespaces_policy_lets_runners_reach_dns_and_the_runner_api_alone() -> None:
    policy = policies.build_baseline_policy_spec("team", CONTAINMENT)

    assert policy["metadata"]["name"] == "helmr-runners"
    assert policy["metadata"]["namespace"] == "team"
    assert "ownerReferences" not in policy["metadata"]  # outlives any one Actor
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"helmr.dev/component": "runner"}}
    # Both directions listed: whatever no rule allows is denied.
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [{"from": [NODE]}]
    assert spec["egress"] == [
        KUBE_DNS,
        {"to": [NODE], "ports": [{"port": 8081, "protocol": "TCP"}]},
    ]


def test_dns_is_kube_system_dns_pods_on_53_or_their_named_ports() -> None:
    [peer] = KUBE_DNS["to"]
    assert peer["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
    }
    assert peer["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    ports = {(p["port"], p["protocol"]) for p in KUBE_DNS["ports"]}
    assert ports == {(53, "UDP"), (53, "TCP"), ("dns", "UDP"), ("dns-tcp", "TCP")}


def test_an_actor_without_network_settings_opens_nothing_more() -> None:
    policy = policies.build_actor_policy_spec(actor_of(), CONTAINMENT)

    assert policy["metadata"]["name"] == "helmr-runners-echo"
    assert policy["metadata"]["labels"]["helmr.dev/actor"] == "echo"
    assert policy["spec"] == {
        "podSelector": {
            "matchLabels": {"helmr.dev/component": "runner", "helmr.dev/actor": "echo"}
        },
        "policyTypes": ["Egress"],
        "egress": [],
    }


def test_an_actors_policy_is_owned_by_it() -> None:
    [owner] = policies.build_actor_policy_spec(actor_of(), CONTAINMENT)["metadata"][
        "ownerReferences"
    ]
    assert owner == {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Actor",
        "name": "echo",
        "uid": "uid-a",
        "controller": True,
    }


def test_both_policies_select_the_actors_runner_pods() -> None:
    labels = pods.build_runner_pod_spec(runner_spec())["metadata"]["labels"]
    assert labels["helmr.dev/actor"] == "echo"
    baseline = policies.build_baseline_policy_spec("team", CONTAINMENT)
    own = policies.build_actor_policy_spec(actor_of(), CONTAINMENT)
    for policy in (baseline, own):
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_an_allowed_cidr_and_its_ports() -> None:
    assert egress_of(
        {"cidr": "203.0.113.0/24", "ports": [{"port": 443}, {"port": 53, "protocol": "UDP"}]}
    ) == [
        {
            "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
            "ports": [{"port": 443, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        }
    ]


def test_an_entry_without_ports_allows_every_port() -> None:
    [rule] = egress_of({"cidr": "203.0.113.7/32"})
    assert "ports" not in rule


@pytest.mark.parametrize(
    ("cidr", "excepted"),
    [
        ("0.0.0.0/0", ["169.254.169.254/32"]),
        ("169.254.0.0/16", ["169.254.169.254/32"]),
        ("::/0", ["fd00:ec2::254/128"]),
        ("fd00:ec2::/32", ["fd00:ec2::254/128"]),
    ],
)
def test_metadata_addresses_inside_an_allowed_cidr_stay_closed(
    cidr: str, excepted: list[str]
) -> None:
    [rule] = egress_of({"cidr": cidr, "ports": [{"port": 80}]})
    assert rule["to"] == [{"ipBlock": {"cidr": cidr, "except": excepted}}]


@pytest.mark.parametrize("cidr", ["169.254.169.254/32", "fd00:ec2::254/128"])
def test_a_metadata_address_named_exactly_is_open(cidr: str) -> None:
    [rule] = egress_of({"cidr": cidr, "ports": [{"port": 80}]})
    assert rule["to"] == [{"ipBlock": {"cidr": cidr}}]


def test_a_cidr_without_metadata_addresses_excepts_nothing() -> None:
    [rule] = egress_of({"cidr": "10.0.0.0/8"}, {"cidr": "2001:db8::/32"})[:1]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    assert policies.excepted_metadata("2001:db8::/32", METADATA_ADDRESSES) == []


def test_the_metadata_addresses_are_a_setting() -> None:
    # The local cluster's tests stand one in on the node (never the real one).
    assert policies.excepted_metadata("10.0.0.0/8", ("10.254.169.254",)) == ["10.254.169.254/32"]
    settings = Settings(runner_metadata_addresses="10.254.169.254, fd00:ec2::254")
    assert settings.runner_metadata_addresses == ("10.254.169.254", "fd00:ec2::254")
    with pytest.raises(ValueError, match="runner_metadata_addresses"):
        Settings(runner_metadata_addresses="metadata.google.internal")


# --- who the control plane is, as the settings say


def test_a_control_plane_at_an_address_is_that_address() -> None:
    settings = Settings(runner_url="http://192.0.2.2:40123", runner_port=40123)
    containment = policies.containment(settings)
    assert containment is not None
    assert containment.control_plane == (NODE,)
    assert containment.runner_port == 40123
    v6 = policies.containment(Settings(runner_url="http://[fd00::2]:8081"))
    assert v6 is not None
    assert v6.control_plane == ({"ipBlock": {"cidr": "fd00::2/128"}},)


def test_a_control_plane_by_name_is_the_default_releases_pods_unless_told() -> None:
    containment = policies.containment(Settings())
    assert containment is not None
    assert containment.control_plane == (policies.DEFAULT_RELEASE,)
    chart = {"podSelector": {"matchLabels": {"app.kubernetes.io/instance": "mine"}}}
    told = policies.containment(Settings(control_plane_peers=(chart,)))
    assert told is not None
    assert told.control_plane == (chart,)


# --- the egress proxy: runner pods of Actors naming hostnames reach it

PROXY = {"podSelector": {"matchLabels": {"app.kubernetes.io/component": "egress-proxy"}}}
HOSTS = {"egressHosts": [{"host": "api.example.com"}]}


def test_an_actor_naming_hosts_may_reach_the_egress_proxy_alone() -> None:
    proxied = replace(CONTAINMENT, egress_proxy=(PROXY,), egress_proxy_port=3128)
    egress = policies.build_actor_policy_spec(actor_of(HOSTS), proxied)["spec"]["egress"]
    assert egress == [{"to": [PROXY], "ports": [{"port": 3128, "protocol": "TCP"}]}]
    # Without hostnames, not even the proxy; without a proxy, nothing.
    assert policies.build_actor_policy_spec(actor_of(), proxied)["spec"]["egress"] == []
    assert policies.build_actor_policy_spec(actor_of(HOSTS), CONTAINMENT)["spec"]["egress"] == []


def test_the_egress_proxy_is_its_peers_or_the_address_of_its_url() -> None:
    told = policies.containment(
        Settings(egress_proxy_url="http://proxy.helmr-system.svc:3128", egress_proxy_peers=(PROXY,))
    )
    assert told is not None
    assert (told.egress_proxy, told.egress_proxy_port) == ((PROXY,), 3128)
    at = policies.containment(
        Settings(egress_proxy_url="http://192.0.2.9:3129", egress_proxy_port=3129)
    )
    assert at is not None
    assert (at.egress_proxy, at.egress_proxy_port) == (
        ({"ipBlock": {"cidr": "192.0.2.9/32"}},),
        3129,
    )
    none = policies.containment(Settings())
    assert none is not None
    assert none.egress_proxy == ()


def test_no_policies_when_turned_off() -> None:
    assert policies.containment(Settings(runner_network_policy=False)) is None


# --- when they are written


class AppliedPolicies:
    """The policies applied, in order, as (namespace, name, egress)."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, str, Any]] = []

    async def apply_network_policy(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        self.applied.append((meta["namespace"], meta["name"], body["spec"]["egress"]))


def writer(
    containment: policies.Containment | None = CONTAINMENT,
) -> tuple[policies.RunnerPolicies, AppliedPolicies]:
    kube = AppliedPolicies()
    return policies.RunnerPolicies(kube, containment), kube  # type: ignore[arg-type]


async def test_both_policies_are_written_once_per_actor_generation() -> None:
    runner_policies, kube = writer()
    await runner_policies.ensure(actor_of())
    await runner_policies.ensure(actor_of())
    assert [name for _, name, _ in kube.applied] == ["helmr-runners", "helmr-runners-echo"]

    opened = actor_of({"egress": [{"cidr": "203.0.113.0/24"}]}, generation=2)
    await runner_policies.ensure(opened)
    assert [name for _, name, _ in kube.applied[2:]] == ["helmr-runners", "helmr-runners-echo"]
    assert kube.applied[-1][2] == [{"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}]}]


async def test_an_actor_made_again_gets_its_policies_again() -> None:
    # Its namespace may have been deleted and made again, policies and all.
    runner_policies, kube = writer()
    await runner_policies.ensure(actor_of())
    again = actor_of().model_copy(
        update={"metadata": actor_of().metadata.model_copy(update={"uid": "uid-b"})}
    )
    await runner_policies.ensure(again)
    assert len(kube.applied) == 4


async def test_nothing_is_written_when_turned_off() -> None:
    runner_policies, kube = writer(None)
    await runner_policies.ensure(actor_of())
    assert kube.applied == []


def test_a_runner_of_an_actor_naming_hosts_is_told_the_proxy() -> None:
    proxy = "http://helmr-egress-proxy.helmr-system.svc:3128"
    spec = runner_spec({"network": HOSTS}, egress_proxy_url=proxy)
    [container] = pods.build_runner_pod_spec(spec)["spec"]["containers"]
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == env["https_proxy"] == proxy
    # The runner API (spec.runner_url's host) stays direct.
    assert env["NO_PROXY"] == env["no_proxy"] == "helmr"
    for unproxied in (runner_spec({"network": HOSTS}), runner_spec(egress_proxy_url=proxy)):
        [container] = pods.build_runner_pod_spec(unproxied)["spec"]["containers"]
        assert not {"HTTPS_PROXY", "NO_PROXY"} & {var["name"] for var in container["env"]}
