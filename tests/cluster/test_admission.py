"""The committed CRDs at a real apiserver: what is admitted, what is refused, and why.

Every refusal must name the offending field, so a user who mistypes a manifest
learns what to fix from ``kubectl``'s error alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from helmr.resources import (
    ACTORS,
    GROUP,
    SESSIONS,
    TURNS,
    VERSION,
    WORKSPACES,
    Actor,
    ActorRef,
    ActorSpec,
    ActorStatus,
    ObjectMeta,
    Session,
    SessionRef,
    SessionSpec,
    Turn,
    TurnError,
    TurnSpec,
    TurnStatus,
    WarmPoolStatus,
)
from helmr.states import ErrorInfo

pytestmark = pytest.mark.usefixtures("crds")

Manifest = dict[str, Any]
SECRET_KEY = {"name": "llm", "key": "api-key"}


def actor(**spec: Any) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Actor",
        "metadata": {"name": "reviewer"},
        "spec": {"image": "helmr-runner:dev", "entrypoint": "reviewer.app:reviewer", **spec},
    }


def session(**spec: Any) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Session",
        "metadata": {"name": "review-42"},
        # state: the default the apiserver fills in, so a Session read back compares equal.
        "spec": {"actorRef": {"name": "reviewer"}, "workspace": "repo-a", "state": "Open", **spec},
    }


def turn(**spec: Any) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Turn",
        "metadata": {"name": "review-42-1"},
        "spec": {"sessionRef": {"name": "review-42"}, "input": {"issue": "APP-42"}, **spec},
    }


def workspace(**spec: Any) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workspace",
        "metadata": {"name": "repo-a"},
        "spec": spec,
    }


def without(manifest: Manifest, *path: str) -> Manifest:
    trimmed = copy.deepcopy(manifest)
    node = trimmed
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return trimmed


def renamed(manifest: Manifest, name: str) -> Manifest:
    return {**manifest, "metadata": {"name": name}}


PLURALS = {"Actor": ACTORS, "Session": SESSIONS, "Turn": TURNS, "Workspace": WORKSPACES}


class Objects:
    """The Helmr objects of one namespace, addressed by their manifests."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    def create(self, manifest: Manifest, field_validation: str | None = None) -> Manifest:
        plural = PLURALS[manifest["kind"]]
        created = self.api.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, manifest, field_validation=field_validation
        )
        return cast(Manifest, created)

    def get(self, manifest: Manifest) -> Manifest:
        plural, name = PLURALS[manifest["kind"]], manifest["metadata"]["name"]
        got = self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)
        return cast(Manifest, got)

    def patch(self, manifest: Manifest, body: Manifest) -> Manifest:
        """A JSON merge patch of the object ``manifest`` names."""
        plural, name = PLURALS[manifest["kind"]], manifest["metadata"]["name"]
        patched = self.api.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, body
        )
        return cast(Manifest, patched)

    def patch_status(self, manifest: Manifest, body: Manifest) -> Manifest:
        """A JSON merge patch of the status subresource of the object ``manifest`` names."""
        plural, name = PLURALS[manifest["kind"]], manifest["metadata"]["name"]
        patched = self.api.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, plural, name, body
        )
        return cast(Manifest, patched)


@pytest.fixture
def objects(api_client: client.ApiClient, namespace: str) -> Objects:
    return Objects(client.CustomObjectsApi(api_client), namespace)


def refusal(call: Callable[[], object]) -> tuple[int, str]:
    """The HTTP status and message of a request the apiserver must refuse."""
    with pytest.raises(ApiException) as caught:
        call()
    message = json.loads(caught.value.body or "{}").get("message", "")
    return caught.value.status, str(message)


# --- admitted ---------------------------------------------------------------------------


def test_minimal_manifests_are_admitted_and_defaulted(objects: Objects) -> None:
    built = Actor(
        metadata=ObjectMeta(name="reviewer"),
        spec=ActorSpec(image="helmr-runner:dev", entrypoint="reviewer.app:reviewer"),
    )
    stored = Actor.from_manifest(objects.create(built.to_manifest()))
    assert stored.metadata.namespace == objects.namespace
    # The apiserver filled in the defaults the model declares.
    assert stored.spec == built.spec
    assert stored.to_wire()["spec"] == {
        "image": "helmr-runner:dev",
        "entrypoint": "reviewer.app:reviewer",
        "imagePullPolicy": "IfNotPresent",
        # No idleTimeoutSeconds, queueLimit nor retry.maxAttempts: unset, the code's
        # actor(idle_timeout=, queue=, retry=) applies, else Helmr's default.
        "retry": {"backoffSeconds": 5},
        "computer": {
            "size": "1Gi",
            "accessMode": "ReadWriteOnce",
            "keepSaves": 5,
            "saveIntervalSeconds": 0,
            "pauseAt": 0.9,
            "stopAt": 0.98,
            "resolveAt": 0.85,
            "usageIntervalSeconds": 10,
        },
    }

    built_session = Session(
        metadata=ObjectMeta(name="review-42"),
        spec=SessionSpec(actor_ref=ActorRef(name="reviewer"), workspace="repo-a"),
    )
    stored_session = Session.from_manifest(objects.create(built_session.to_manifest()))
    assert stored_session.spec == built_session.spec

    built_turn = Turn(
        metadata=ObjectMeta(name="review-42-1"),
        spec=TurnSpec(session_ref=SessionRef(name="review-42"), input=None),
    )
    stored_turn = objects.create(built_turn.to_manifest())
    # JSON null is an input in its own right, not an absent one.
    assert stored_turn["spec"] == {"sessionRef": {"name": "review-42"}, "input": None}


ZONE = "topology.kubernetes.io/zone"
RUNNERS = {"matchLabels": {"helmr.dev/component": "runner"}}
FULL_POD: Manifest = {
    "imagePullSecrets": [{"name": "registry-a"}, {"name": "registry.b"}],
    "runtimeClassName": "gvisor",
    "priorityClassName": "agents-low",
    "nodeSelector": {"pool": "agents", "example.com/gpu": "none"},
    "tolerations": [
        {"key": "pool", "operator": "Equal", "value": "agents", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]},
                    {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "spot", "operator": "Exists"}]},
                }
            ],
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "cache"}},
                        "namespaceSelector": {},
                        "topologyKey": ZONE,
                    },
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "tier", "operator": "NotIn", "values": ["agents"]}
                        ]
                    },
                    "namespaces": ["databases"],
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": RUNNERS,
            "minDomains": 2,
            "matchLabelKeys": ["helmr.dev/session"],
            "nodeAffinityPolicy": "Honor",
            "nodeTaintsPolicy": "Ignore",
        }
    ],
    "labels": {"team": "reviews", "example.com/cost-center": "r-42"},
    "annotations": {"example.com/owner": "reviews team <reviews@example.com>"},
}
"""Every runner pod setting an Actor may hold, each used once."""
FULL_NETWORK = {
    "egress": [
        {"cidr": "203.0.113.0/24", "ports": [{"port": 443, "protocol": "TCP"}]},
        {"cidr": "2001:db8::/32", "ports": [{"port": 53, "protocol": "UDP"}]},
        {"cidr": "169.254.169.254/32"},
    ],
    "egressHosts": [{"host": "api.openai.com"}, {"host": "*.example.com", "ports": [443, 8443]}],
}
"""Every network setting an Actor may hold."""


def test_full_manifests_are_admitted_verbatim(objects: Objects) -> None:
    full_actor = actor(
        imagePullPolicy="Never",
        resources={
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        idleTimeoutSeconds=60,
        maxTurnDurationSeconds=600,
        queueLimit=10,
        maxDurationSeconds=3600,
        ttlSeconds=600,
        retry={"maxAttempts": 5, "backoffSeconds": 10},
        computer={
            "size": "20Gi",
            "storageClassName": "local-path",
            "volumeSnapshotClassName": "csi-hostpath.snapclass",
            "accessMode": "ReadWriteOncePod",
            "keepSaves": 3,
            "saveIntervalSeconds": 30,
            "pauseAt": 0.8,
            "stopAt": 0.95,
            "resolveAt": 0.7,
            "usageIntervalSeconds": 30,
        },
        env=[{"name": "LOG_LEVEL", "value": "debug"}, {"name": "EMPTY", "value": ""}],
        pod=FULL_POD,
        network=FULL_NETWORK,
        warmPool={"size": 3},
    )
    assert objects.create(full_actor)["spec"] == full_actor["spec"]

    full_session = session(
        key="APP-42",
        idempotencyKey="start:APP-42",
        maxTurnDurationSeconds=60,
        idleTimeoutSeconds=30,
    )
    assert objects.create(full_session)["spec"] == full_session["spec"]

    nested_input = {"issue": "APP-42", "files": ["a.py", {"deep": [1, 2.5, True, None]}]}
    full_turn = turn(input=nested_input, idempotencyKey="linear:event-123", source="kubectl")
    assert objects.create(full_turn)["spec"] == full_turn["spec"]


def test_short_names_and_category_are_served(api_client: client.ApiClient) -> None:
    resources = client.CustomObjectsApi(api_client).get_api_resources(GROUP, VERSION).to_dict()
    served = {r["name"]: r for r in resources["resources"] if "/" not in r["name"]}
    assert served[ACTORS]["short_names"] == ["hact"]
    assert served[SESSIONS]["short_names"] == ["hses"]
    assert served[TURNS]["short_names"] == ["hturn"]
    assert all(served[plural]["categories"] == ["helmr"] for plural in PLURALS.values())


# --- refused at creation ----------------------------------------------------------------

INVALID: list[tuple[str, Manifest, str]] = [
    ("actor-without-image", without(actor(), "spec", "image"), "spec.image"),
    ("actor-image-with-space", actor(image="helmr runner"), "spec.image"),
    ("actor-entrypoint-without-attr", actor(entrypoint="reviewer.app"), "spec.entrypoint"),
    ("actor-pull-policy-unknown", actor(imagePullPolicy="Sometimes"), "spec.imagePullPolicy"),
    ("actor-idle-timeout-zero", actor(idleTimeoutSeconds=0), "spec.idleTimeoutSeconds"),
    ("actor-queue-limit-too-high", actor(queueLimit=10_001), "spec.queueLimit"),
    ("actor-retry-zero", actor(retry={"maxAttempts": 0}), "spec.retry.maxAttempts"),
    ("actor-ttl-zero", actor(ttlSeconds=0), "spec.ttlSeconds"),
    (
        "actor-cpu-not-a-quantity",
        actor(resources={"requests": {"cpu": "lots"}}),
        "spec.resources.requests.cpu",
    ),
    (
        "actor-memory-request-over-limit",
        actor(resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}),
        "spec.resources.requests.memory must not exceed spec.resources.limits.memory",
    ),
    ("actor-disk-size-zero", actor(computer={"size": "0"}), "spec.computer.size"),
    (
        "actor-storage-class-not-a-name",
        actor(computer={"storageClassName": "Fast_SSD"}),
        "spec.computer.storageClassName",
    ),
    (
        "actor-env-reserved-name",
        actor(env=[{"name": "HELMR_URL", "value": "http://evil"}]),
        "spec.env[0].name",
    ),
    ("actor-env-name-starts-with-digit", actor(env=[{"name": "1X"}]), "spec.env[0].name"),
    ("actor-env-duplicate-name", actor(env=[{"name": "A"}, {"name": "A"}]), "spec.env[1]"),
    (
        "actor-turn-longer-than-run",
        actor(maxTurnDurationSeconds=600, maxDurationSeconds=60),
        "spec.maxTurnDurationSeconds must not exceed spec.maxDurationSeconds",
    ),
    ("actor-name-with-dot", renamed(actor(), "reviewer.v2"), "metadata.name"),
    ("actor-warm-pool-negative", actor(warmPool={"size": -1}), "spec.warmPool.size"),
    (
        "actor-warm-pool-too-large",
        actor(warmPool={"size": 51}),
        "spec.warmPool.size must be at most 50",
    ),
    (
        "actor-pod-system-priority",
        actor(pod={"priorityClassName": "system-cluster-critical"}),
        "spec.pod.priorityClassName",
    ),
    (
        "actor-pod-pull-secret-not-a-name",
        actor(pod={"imagePullSecrets": [{"name": "Registry_A"}]}),
        "spec.pod.imagePullSecrets[0].name",
    ),
    (
        "actor-pod-pull-secret-twice",
        actor(pod={"imagePullSecrets": [{"name": "a"}, {"name": "a"}]}),
        "spec.pod.imagePullSecrets[1]",
    ),
    (
        "actor-pod-runtime-class-not-a-name",
        actor(pod={"runtimeClassName": "gVisor"}),
        "spec.pod.runtimeClassName",
    ),
    (
        "actor-pod-helmr-annotation",
        actor(pod={"annotations": {"helmr.dev/session": "other"}}),
        "spec.pod.annotations",
    ),
    (
        "actor-pod-helmr-label",
        actor(pod={"labels": {"helmr.dev/component": "control-plane"}}),
        "spec.pod.labels",
    ),
    (
        "actor-pod-apparmor-unconfined",
        actor(
            pod={
                "annotations": {
                    "container.apparmor.security.beta.kubernetes.io/runner": "unconfined"
                }
            }
        ),
        "spec.pod.annotations",
    ),
    (
        "actor-pod-label-key-not-a-key",
        actor(pod={"labels": {"team name": "reviews"}}),
        "spec.pod.labels",
    ),
    (
        "actor-pod-label-value-too-long",
        actor(pod={"labels": {"team": "x" * 64}}),
        "spec.pod.labels.team",
    ),
    (
        "actor-pod-node-selector-key-not-a-key",
        actor(pod={"nodeSelector": {"/pool": "agents"}}),
        "spec.pod.nodeSelector",
    ),
    (
        "actor-pod-too-many-labels",
        actor(pod={"labels": {f"l{i}": "v" for i in range(33)}}),
        "spec.pod.labels",
    ),
    (
        "actor-pod-toleration-exists-with-value",
        actor(pod={"tolerations": [{"key": "pool", "operator": "Exists", "value": "agents"}]}),
        "spec.pod.tolerations[0].value",
    ),
    (
        "actor-pod-toleration-seconds-without-no-execute",
        actor(pod={"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}),
        "spec.pod.tolerations[0].tolerationSeconds",
    ),
    (
        "actor-pod-node-affinity-in-without-values",
        actor(
            pod={
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In"}]}
                            ]
                        }
                    }
                }
            }
        ),
        "spec.pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values",
    ),
    (
        "actor-pod-spread-without-topology-key",
        actor(
            pod={
                "topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
            }
        ),
        "spec.pod.topologySpreadConstraints[0].topologyKey",
    ),
    (
        "actor-pod-spread-min-domains-scheduling-anyway",
        actor(
            pod={
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "minDomains": 2,
                    }
                ]
            }
        ),
        "spec.pod.topologySpreadConstraints[0].minDomains",
    ),
    (
        "actor-egress-host-an-address",
        actor(network={"egressHosts": [{"host": "api.openai.com"}, {"host": "203.0.113.7"}]}),
        "spec.network.egressHosts[1].host",
    ),
    (
        "actor-egress-host-upper-case",
        actor(network={"egressHosts": [{"host": "API.openai.com"}]}),
        "spec.network.egressHosts[0].host",
    ),
    (
        "actor-egress-host-port-zero",
        actor(network={"egressHosts": [{"host": "api.openai.com", "ports": [0]}]}),
        "spec.network.egressHosts[0].ports[0]",
    ),
    (
        "actor-network-not-a-cidr",
        actor(network={"egress": [{"cidr": "api.example.com"}]}),
        "spec.network.egress[0].cidr",
    ),
    (
        "actor-network-address-without-prefix",
        actor(network={"egress": [{"cidr": "203.0.113.7"}]}),
        "spec.network.egress[0].cidr",
    ),
    (
        "actor-network-host-bits-set",
        actor(network={"egress": [{"cidr": "10.0.0.0/8"}, {"cidr": "10.1.2.3/8"}]}),
        "spec.network.egress[1].cidr",
    ),
    (
        "actor-network-ipv6-not-canonical",
        actor(network={"egress": [{"cidr": "2001:DB8:0::/32"}]}),
        "spec.network.egress[0].cidr",
    ),
    (
        "actor-network-port-zero",
        actor(network={"egress": [{"cidr": "10.0.0.0/8", "ports": [{"port": 0}]}]}),
        "spec.network.egress[0].ports[0].port",
    ),
    (
        "actor-network-port-too-high",
        actor(network={"egress": [{"cidr": "10.0.0.0/8", "ports": [{"port": 65536}]}]}),
        "spec.network.egress[0].ports[0].port",
    ),
    (
        "actor-network-protocol-unknown",
        actor(
            network={"egress": [{"cidr": "10.0.0.0/8", "ports": [{"port": 1, "protocol": "ICMP"}]}]}
        ),
        "spec.network.egress[0].ports[0].protocol",
    ),
    (
        "actor-network-no-ports-listed",
        actor(network={"egress": [{"cidr": "10.0.0.0/8", "ports": []}]}),
        "spec.network.egress[0].ports",
    ),
    (
        "actor-network-too-many-entries",
        actor(network={"egress": [{"cidr": f"10.0.{i}.0/24"} for i in range(33)]}),
        "spec.network.egress",
    ),
    ("session-without-actor-ref", without(session(), "spec", "actorRef"), "spec.actorRef"),
    ("session-actor-ref-not-a-name", session(actorRef={"name": "Reviewer"}), "spec.actorRef.name"),
    ("session-workspace-not-a-label", session(workspace="repo.a"), "spec.workspace"),
    ("session-idle-timeout-negative", session(idleTimeoutSeconds=-1), "spec.idleTimeoutSeconds"),
    (
        "session-max-turn-over-a-week",
        session(maxTurnDurationSeconds=604_801),
        "spec.maxTurnDurationSeconds",
    ),
    ("session-key-too-long", session(key="k" * 257), "spec.key"),
    (
        "session-env-reserved-name",
        session(env=[{"name": "HELMR_SESSION_ID", "value": "ses_other"}]),
        "spec.env[0].name",
    ),
    ("session-env-no-value", session(env=[{"name": "A"}]), "spec.env[0]"),
    (
        "session-env-value-and-secret",
        session(env=[{"name": "A", "value": "x", "valueFrom": {"secretKeyRef": SECRET_KEY}}]),
        "spec.env[0]",
    ),
    (
        "session-env-secret-not-a-name",
        session(env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "L_M", "key": "k"}}}]),
        "spec.env[0].valueFrom.secretKeyRef.name",
    ),
    (
        "session-env-duplicate-name",
        session(env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
        "spec.env[1]",
    ),
    (
        "session-env-from-reserved-prefix",
        session(envFrom=[{"secretRef": {"name": "s"}, "prefix": "HELMR_"}]),
        "spec.envFrom[0].prefix",
    ),
    ("session-name-too-long", renamed(session(), "s" * 64), "metadata.name"),
    ("turn-without-spec", without(turn(), "spec"), "spec: Required value"),
    ("turn-without-input", without(turn(), "spec", "input"), "spec.input"),
    ("turn-without-session-ref", without(turn(), "spec", "sessionRef"), "spec.sessionRef"),
    ("turn-session-ref-not-a-name", turn(sessionRef={"name": "a_b"}), "spec.sessionRef.name"),
    ("turn-empty-idempotency-key", turn(idempotencyKey=""), "spec.idempotencyKey"),
    ("turn-source-too-long", turn(source="s" * 254), "spec.source"),
    ("actor-access-mode-unknown", actor(computer={"accessMode": "Shared"}), "spec.computer"),
    ("actor-keep-no-saves", actor(computer={"keepSaves": 0}), "spec.computer.keepSaves"),
    ("workspace-size-not-a-quantity", workspace(size="big"), "spec.size"),
    ("workspace-keep-too-many-saves", workspace(keepSaves=101), "spec.keepSaves"),
    ("workspace-class-not-a-name", workspace(storageClassName="A_B"), "spec.storageClassName"),
    ("workspace-name-too-long", renamed(workspace(), "w" * 64), "metadata.name"),
]


@pytest.mark.parametrize(
    ("manifest", "field"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_invalid_manifest_is_refused_naming_the_field(
    objects: Objects, manifest: Manifest, field: str
) -> None:
    status, message = refusal(lambda: objects.create(manifest))
    assert status == 422, message
    assert field in message


def test_unknown_field_is_refused_under_strict_validation(objects: Objects) -> None:
    # kubectl validates strictly by default; a typo must not be silently pruned.
    manifest = session(actor={"name": "reviewer"})
    status, message = refusal(lambda: objects.create(manifest, field_validation="Strict"))
    assert status == 400, message
    assert "spec.actor" in message


# What would loosen the restricted profile or the runner's identity has no field.
NOT_RUNNER_POD_SETTINGS: list[tuple[str, Manifest]] = [
    ("hostNetwork", {"hostNetwork": True}),
    ("hostPID", {"hostPID": True}),
    ("hostIPC", {"hostIPC": True}),
    ("serviceAccountName", {"serviceAccountName": "default"}),
    ("automountServiceAccountToken", {"automountServiceAccountToken": True}),
    ("securityContext", {"securityContext": {"runAsUser": 0}}),
    ("containers", {"containers": [{"securityContext": {"privileged": True}}]}),
    ("volumes", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
    ("nodeName", {"nodeName": "helmr-node"}),
]


@pytest.mark.parametrize(
    "pod",
    [case[1] for case in NOT_RUNNER_POD_SETTINGS],
    ids=[c[0] for c in NOT_RUNNER_POD_SETTINGS],
)
def test_pod_settings_outside_the_subset_are_refused_naming_the_field(
    objects: Objects, pod: Manifest
) -> None:
    (field,) = pod
    status, message = refusal(lambda: objects.create(actor(pod=pod), field_validation="Strict"))
    assert status == 400, message
    assert f'unknown field "spec.pod.{field}"' in message
    # Without strict validation (the API's default) the field is pruned, never applied.
    assert objects.create(actor(pod=pod))["spec"]["pod"] == {}


# --- refused on change: immutable fields -------------------------------------------------

IMMUTABLE: list[tuple[str, Manifest, Manifest, str]] = [
    (
        "session-actor-ref",
        session(),
        {"spec": {"actorRef": {"name": "other"}}},
        "spec.actorRef is immutable",
    ),
    ("session-workspace", session(), {"spec": {"workspace": "repo-b"}}, "spec.workspace"),
    ("session-key-added", session(), {"spec": {"key": "APP-43"}}, "spec.key is immutable"),
    ("session-key-changed", session(key="APP-42"), {"spec": {"key": "APP-43"}}, "spec.key"),
    (
        "session-idempotency-key-removed",
        session(idempotencyKey="start:APP-42"),
        {"spec": {"idempotencyKey": None}},
        "spec.idempotencyKey is immutable",
    ),
    (
        "session-env",
        session(env=[{"name": "A", "value": "1"}]),
        {"spec": {"env": [{"name": "A", "value": "2"}]}},
        "spec.env",
    ),
    (
        "session-env-added",
        session(),
        {"spec": {"envFrom": [{"secretRef": {"name": "s"}}]}},
        "spec.envFrom",
    ),
    ("turn-session-ref", turn(), {"spec": {"sessionRef": {"name": "other"}}}, "sessionRef"),
    ("turn-input-replaced", turn(), {"spec": {"input": "something else"}}, "input"),
    ("turn-input-nested-change", turn(), {"spec": {"input": {"issue": "APP-43"}}}, "input"),
    ("turn-idempotency-key", turn(), {"spec": {"idempotencyKey": "again"}}, "idempotencyKey"),
]


@pytest.mark.parametrize(
    ("manifest", "patch", "field"),
    [case[1:] for case in IMMUTABLE],
    ids=[case[0] for case in IMMUTABLE],
)
def test_immutable_field_cannot_change(
    objects: Objects,
    manifest: Manifest,
    patch: Manifest,
    field: str,
) -> None:
    objects.create(manifest)
    status, message = refusal(lambda: objects.patch(manifest, patch))
    assert status == 422, message
    assert field in message
    assert objects.get(manifest)["spec"] == manifest["spec"]


def test_session_limits_and_turn_metadata_stay_mutable(objects: Objects) -> None:
    a_session = objects.create(session(key="APP-42"))
    patched = objects.patch(a_session, {"spec": {"idleTimeoutSeconds": 90}})
    assert patched["spec"]["idleTimeoutSeconds"] == 90

    a_turn = objects.create(turn())
    labelled = objects.patch(a_turn, {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["labels"] == {"a": "b"}


# --- the status subresource ---------------------------------------------------------------


def test_status_patch_from_the_model_is_admitted(objects: Objects) -> None:
    a_turn = objects.create(turn())
    status = TurnStatus(
        turn_id="turn_01jabc",
        phase="failed",
        sequence=1,
        has_result=False,
        error=TurnError(code="handler_failed", message="boom"),
        process_epoch=1,
    )
    stored = objects.patch_status(a_turn, status.status_patch())
    assert Turn.from_manifest(stored).status == status


def test_actor_warm_pool_status_is_admitted(objects: Objects) -> None:
    an_actor = objects.create(actor(warmPool={"size": 2}))
    status = ActorStatus(warm_pool=WarmPoolStatus(size=2, ready=1, adopted=3))
    stored = objects.patch_status(an_actor, status.status_patch())
    assert Actor.from_manifest(stored).status == status


def test_a_long_failure_is_mirrored_bounded(objects: Objects) -> None:
    # A failure longer than the CRD allows is cut where it is recorded, so the
    # operator's status patch is admitted; uncut, the apiserver refuses it (422),
    # which used to stop the status sync.
    a_turn = objects.create(turn())
    error = ErrorInfo(code="handler_failed", message="x" * 40_000)
    status = TurnStatus(phase="failed", error=TurnError(code=error.code, message=error.message))
    stored = objects.patch_status(a_turn, status.status_patch())
    assert Turn.from_manifest(stored).status == status
    uncut = {"status": {"error": {"code": "handler_failed", "message": "x" * 40_000}}}
    code, message = refusal(lambda: objects.patch_status(a_turn, uncut))
    assert code == 422, message
    assert "status.error.message" in message


INVALID_STATUS: list[tuple[str, Manifest, Manifest, str]] = [
    ("session-phase-unknown", session(), {"status": {"phase": "sleeping"}}, "status.phase"),
    (
        "session-hold-reason-unknown",
        session(),
        {"status": {"hold": {"holdId": "h1", "reason": "whim"}}},
        "status.hold.reason",
    ),
    ("turn-sequence-zero", turn(), {"status": {"sequence": 0}}, "status.sequence"),
    (
        "turn-error-without-code",
        turn(),
        {"status": {"error": {"message": "x"}}},
        "status.error.code",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "patch", "field"),
    [case[1:] for case in INVALID_STATUS],
    ids=[case[0] for case in INVALID_STATUS],
)
def test_invalid_status_is_refused_naming_the_field(
    objects: Objects,
    manifest: Manifest,
    patch: Manifest,
    field: str,
) -> None:
    objects.create(manifest)
    status, message = refusal(lambda: objects.patch_status(manifest, patch))
    assert status == 422, message
    assert field in message
