"""Runner pods by address and their Actors, as the watches tell of them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from helmr.egress.allowlist import Refused
from helmr.egress.directory import Directory


def pod(uid: str, ip: str, actor: str | None = "a", phase: str = "Running") -> dict[str, Any]:
    labels = {"helmr.dev/actor": actor} if actor else {}
    return {
        "metadata": {"uid": uid, "namespace": "team", "labels": labels},
        "status": {"podIP": ip, "phase": phase},
    }


def actor(name: str, hosts: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "helmr.dev/v1alpha1",
        "kind": "Actor",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "image": "r:dev",
            "entrypoint": "p:a",
            "network": {"egressHosts": [{"host": h} for h in hosts]},
        },
    }


def listed(*pods: dict[str, Any]) -> Directory:
    directory = Directory(scopes=2)
    directory.pods_listed(None, pods)
    directory.actors_listed(None, [actor("a", ["api.example.com"])])
    return directory


def test_a_runner_pods_address_names_its_actor_and_what_it_allows() -> None:
    name, allowance = listed(pod("u1", "10.0.0.5")).allowance("10.0.0.5")
    assert name == "team/a"
    allowance.check_host("api.example.com", 443)


def test_an_actor_changed_or_deleted_changes_what_its_runners_may_reach() -> None:
    directory = listed(pod("u1", "10.0.0.5"))
    directory.actor_changed("MODIFIED", actor("a", ["other.example.com"]))
    with pytest.raises(Refused):
        directory.allowance("10.0.0.5")[1].check_host("api.example.com", 443)
    directory.actor_changed("DELETED", actor("a", ["other.example.com"]))
    with pytest.raises(Refused):
        directory.allowance("10.0.0.5")[1].check_host("other.example.com", 443)


def test_an_address_no_runner_pod_has_is_refused() -> None:
    directory = listed(pod("u1", "10.0.0.5"), pod("u2", "10.0.0.6", actor=None))
    for address in ("10.0.0.7", "10.0.0.6"):
        with pytest.raises(Refused, match=f"{address} is not a runner pod"):
            directory.allowance(address, wait=0)


def test_a_deleted_pods_address_is_forgotten_unless_another_pod_has_it_now() -> None:
    directory = listed(pod("u1", "10.0.0.5"))
    directory.pod_changed("MODIFIED", pod("u1", "10.0.0.5", phase="Succeeded"))
    with pytest.raises(Refused):
        directory.allowance("10.0.0.5", wait=0)
    directory.pod_changed("ADDED", pod("u2", "10.0.0.5"))
    directory.pod_changed("DELETED", pod("u1", "10.0.0.5"))
    assert directory.allowance("10.0.0.5", wait=0)[0] == "team/a"


def test_a_listing_of_one_namespace_keeps_the_others() -> None:
    directory = Directory(scopes=0)
    other = pod("u9", "10.0.0.9")
    other["metadata"]["namespace"] = "elsewhere"
    directory.pods_listed("elsewhere", [other])
    directory.pods_listed("team", [pod("u1", "10.0.0.5")])
    directory.pods_listed("team", [])
    assert directory.allowance("10.0.0.9", wait=0)[0] == "elsewhere/a"


def test_a_request_from_a_pod_not_yet_seen_waits_for_the_watch() -> None:
    directory = listed()
    threading.Timer(0.2, directory.pod_changed, ("ADDED", pod("u1", "10.0.0.5"))).start()
    assert directory.allowance("10.0.0.5", wait=10)[0] == "team/a"


def test_an_actor_the_model_cannot_read_allows_nothing_and_stalls_no_other() -> None:
    unreadable = actor("b", ["api.example.com"])
    unreadable["spec"]["network"]["egressHosts"][0]["host"] = "NOT A HOST"
    directory = Directory(scopes=2)
    directory.pods_listed(None, [pod("u1", "10.0.0.5"), pod("u2", "10.0.0.6", actor="b")])
    directory.actors_listed(None, [unreadable, actor("a", ["api.example.com"])])
    directory.allowance("10.0.0.5", wait=0)[1].check_host("api.example.com", 443)
    with pytest.raises(Refused):
        directory.allowance("10.0.0.6", wait=0)[1].check_host("api.example.com", 443)
