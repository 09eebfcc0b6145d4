"""The resource models on the wire: manifests in and out, status patches, Python-side checks."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from helmr.errors import InvalidInput
from helmr.resources import (
    ACTORS,
    API_VERSION,
    SESSIONS,
    TURNS,
    Actor,
    ActorRef,
    ActorSpec,
    EnvVar,
    Hold,
    ObjectMeta,
    Session,
    SessionSpec,
    SessionStatus,
    Turn,
    TurnStatus,
)
from helmr.resources.runner_network import EgressPort

# A Session as the apiserver returns it: server-set metadata, defaults, a status.
SESSION_FROM_SERVER: dict[str, Any] = {
    "apiVersion": "helmr.dev/v1alpha1",
    "kind": "Session",
    "metadata": {
        "name": "review-42",
        "namespace": "team-a",
        "uid": "0b4a6c1e-9d5f-4c39-8a7e-2f1d2c3b4a5d",
        "resourceVersion": "1234",
        "generation": 2,
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"helmr.dev/session-id": "ses_01jabc"},
        "finalizers": ["helmr.dev/session"],
        "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
    },
    "spec": {
        "actorRef": {"name": "reviewer"},
        "workspace": "repo-a",
        "key": "APP-42",
        "idleTimeoutSeconds": 60,
    },
    "status": {
        "sessionId": "ses_01jabc",
        "phase": "open",
        "hold": {"holdId": "hold_1", "reason": "interrupt"},
        "cancelRequestedAt": "2026-01-02T03:05:00Z",
        "consecutiveProcessFailures": 1,
        "processEpoch": 3,
        "runnerPod": "helmr-runner-review-42",
        "activeTurn": "turn_01jdef",
        "lastSequence": 7,
        "queuedTurns": 2,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": "2026-01-02T03:04:06Z",
                "reason": "RunnerReady",
                "message": "",
            }
        ],
        "observedGeneration": 2,
    },
}


def test_manifest_round_trips_unchanged() -> None:
    session = Session.from_manifest(copy.deepcopy(SESSION_FROM_SERVER))
    assert session.to_manifest() == SESSION_FROM_SERVER


def test_manifest_reads_as_snake_case() -> None:
    session = Session.from_manifest(SESSION_FROM_SERVER)
    assert session.metadata.name == "review-42"
    assert session.spec.actor_ref.name == "reviewer"
    assert session.spec.idle_timeout_seconds == 60
    assert session.status is not None
    assert session.status.hold == Hold(hold_id="hold_1", reason="interrupt")
    assert session.status.cancel_requested_at == datetime(2026, 1, 2, 3, 5, tzinfo=UTC)


def test_null_reads_as_absent() -> None:
    manifest = copy.deepcopy(SESSION_FROM_SERVER)
    manifest["status"]["hold"] = None
    status = Session.from_manifest(manifest).status
    assert status is not None
    assert status.hold is None


def test_built_manifest_leaves_defaults_to_the_apiserver() -> None:
    actor = Actor(
        metadata=ObjectMeta(name="reviewer", namespace="team-a"),
        spec=ActorSpec(
            image="runner:dev",
            entrypoint="reviewer.app:reviewer",
            env=[EnvVar(name="LOG_LEVEL", value="debug")],
        ),
    )
    assert actor.to_manifest() == {
        "apiVersion": API_VERSION,
        "kind": "Actor",
        "metadata": {"name": "reviewer", "namespace": "team-a"},
        "spec": {
            "image": "runner:dev",
            "entrypoint": "reviewer.app:reviewer",
            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
        },
    }
    assert actor.spec.image_pull_policy == "IfNotPresent"
    # Unset: the actor's own actor(retry=...) once reported, else 3 (helmr.control.limits).
    assert actor.spec.retry.max_attempts is None
    assert actor.spec.queue_limit is None


def test_status_patch_sends_only_what_was_set() -> None:
    patch = SessionStatus(
        phase="closed", closed_how="cancel", hold=None, active_turn=None
    ).status_patch()
    # None clears a field under a JSON merge patch; unset fields stay untouched.
    assert patch == {
        "status": {"phase": "closed", "closedHow": "cancel", "hold": None, "activeTurn": None}
    }


def test_status_patch_writes_rfc3339_times() -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    patch = TurnStatus(phase="running", started_at=started, process_epoch=2).status_patch()
    assert patch == {
        "status": {
            "phase": "running",
            "startedAt": "2026-01-02T03:04:05.600000Z",
            "processEpoch": 2,
        }
    }


def test_turn_result_null_differs_from_no_result() -> None:
    with_null = TurnStatus(phase="completed", has_result=True, result=None).status_patch()
    without = TurnStatus(phase="completed", has_result=False).status_patch()
    assert with_null["status"]["result"] is None
    assert "result" not in without["status"]


def test_turn_input_is_any_json() -> None:
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "Turn",
        "metadata": {"name": "t1"},
        "spec": {"sessionRef": {"name": "s1"}, "input": [1, "two", {"three": None}]},
    }
    turn = Turn.from_manifest(manifest)
    assert turn.spec.input == [1, "two", {"three": None}]
    assert turn.to_manifest() == manifest


def test_other_kind_is_refused() -> None:
    with pytest.raises(InvalidInput, match="kind Turn"):
        Turn.from_manifest(SESSION_FROM_SERVER)


def test_invalid_manifest_names_the_field() -> None:
    manifest = copy.deepcopy(SESSION_FROM_SERVER)
    manifest["spec"]["actorRef"]["name"] = "Not_A_Name"
    with pytest.raises(InvalidInput) as caught:
        Session.from_manifest(manifest)
    assert caught.value.details["fields"] == ["spec.actorRef.name"]


@pytest.mark.parametrize(
    "spec",
    [
        {"image": "runner:dev", "entrypoint": "no_colon"},
        {"image": "runner:dev", "entrypoint": "pkg:attr", "imagePullPolicy": "Sometimes"},
        {"image": "runner dev", "entrypoint": "pkg:attr"},
        {"image": "runner:dev", "entrypoint": "pkg:attr", "queueLimit": 0},
        {"image": "runner:dev", "entrypoint": "pkg:attr", "computer": {"size": "-1Gi"}},
        {"image": "runner:dev", "entrypoint": "pkg:attr", "env": [{"name": "1X"}]},
    ],
)
def test_python_checks_what_the_schema_checks(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ActorSpec.model_validate(spec)


@pytest.mark.parametrize(
    "pod",
    [
        {"labels": {"team name": "reviews"}},
        {"labels": {"example.com/": "x"}},
        {"labels": {"team": "x" * 64}},
        {"annotations": {"n" * 64: "x"}},
        {"nodeSelector": {"-pool": "agents"}},
        {"imagePullSecrets": [{"name": "Registry"}]},
        {"runtimeClassName": "g_visor"},
        {"tolerations": [{"key": "k", "effect": "Sometimes"}]},
        {
            "topologySpreadConstraints": [
                {"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        },
    ],
)
def test_python_checks_the_runner_pod_settings_as_the_schema_does(pod: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ActorSpec.model_validate({"image": "runner:dev", "entrypoint": "pkg:attr", "pod": pod})


def test_runner_pod_settings_read_back_as_written() -> None:
    pod = {
        "imagePullSecrets": [{"name": "registry"}],
        "runtimeClassName": "gvisor",
        "nodeSelector": {"example.com/pool": "agents"},
        "tolerations": [{"operator": "Exists"}],
        "labels": {"team": "reviews", "empty": ""},
        "annotations": {"example.com/owner": "reviews team"},
    }
    spec = ActorSpec.model_validate(
        {"image": "runner:dev", "entrypoint": "pkg:attr", "imagePullPolicy": "Always", "pod": pod}
    )
    assert spec.image_pull_policy == "Always"
    assert spec.to_wire()["pod"] == pod


def test_python_names_are_accepted_too() -> None:
    spec = SessionSpec(actor_ref=ActorRef(name="reviewer"), workspace="repo-a")
    assert spec.to_wire() == {"actorRef": {"name": "reviewer"}, "workspace": "repo-a"}


def test_plural_names() -> None:
    assert (ACTORS, SESSIONS, TURNS) == ("actors", "sessions", "turns")


@pytest.mark.parametrize(
    "egress",
    [
        [{"cidr": "api.example.com"}],
        [{"cidr": "203.0.113.7"}],
        [{"cidr": "10.1.2.3/8"}],
        [{"cidr": "10.0.0.0/8", "ports": [{"port": 0}]}],
        [{"cidr": "10.0.0.0/8", "ports": [{"port": 1, "protocol": "ICMP"}]}],
        [{"cidr": "10.0.0.0/8", "ports": []}],
        [{"cidr": f"10.0.{i}.0/24"} for i in range(33)],
    ],
)
def test_python_checks_the_network_settings_as_the_schema_does(egress: list[Any]) -> None:
    with pytest.raises(ValidationError):
        ActorSpec.model_validate(
            {"image": "runner:dev", "entrypoint": "pkg:attr", "network": {"egress": egress}}
        )


def test_network_settings_read_back_as_written() -> None:
    # Whatever the apiserver admits (canonical CIDRs, IPv4-mapped ones included),
    # the operator can read.
    egress = [
        {"cidr": "0.0.0.0/0", "ports": [{"port": 443, "protocol": "TCP"}]},
        {"cidr": "2001:db8::/32", "ports": [{"port": 53, "protocol": "UDP"}]},
        {"cidr": "169.254.169.254/32"},
        {"cidr": "::ffff:10.0.0.0/104"},
    ]
    spec = ActorSpec.model_validate(
        {"image": "runner:dev", "entrypoint": "pkg:attr", "network": {"egress": egress}}
    )
    assert spec.network is not None
    assert spec.model_dump(mode="json", by_alias=True, exclude_unset=True)["network"] == {
        "egress": egress
    }
    assert EgressPort(port=80).protocol == "TCP"


@pytest.mark.parametrize(
    "host",
    ["203.0.113.7", "API.example.com", "localhost", "*.com", "a.*.example.com", "-a.example.com"],
)
def test_an_egress_host_is_a_lower_case_fully_qualified_name(host: str) -> None:
    with pytest.raises(ValidationError, match="host"):
        ActorSpec.model_validate(
            {"image": "r:dev", "entrypoint": "p:a", "network": {"egressHosts": [{"host": host}]}}
        )


def test_egress_hosts_read_back_as_written_and_default_to_https() -> None:
    hosts = [{"host": "*.example.com"}, {"host": "api.openai.com", "ports": [443, 8443]}]
    spec = ActorSpec.model_validate(
        {"image": "r:dev", "entrypoint": "p:a", "network": {"egressHosts": hosts}}
    )
    assert spec.network is not None
    assert spec.network.egress_hosts is not None
    assert spec.to_wire()["network"] == {"egressHosts": hosts}
    assert [h.allowed_ports for h in spec.network.egress_hosts] == [(443,), (443, 8443)]
