"""Runner pods get the operator's placement (the chart's ``runner.nodeSelector``
and ``runner.tolerations``) merged with their Actor's ``spec.pod`` settings:
the chart's nodeSelector keys win, its tolerations come first, Helmr's labels
win; and nothing an Actor sets loosens the pod's restricted security or its
runner identity."""

from __future__ import annotations

from typing import Any

from helmr.operator.runners import pods
from tests.unit.operator.test_volumes import _runner_spec as runner_spec

TOLERATION = {"key": "helmr.dev/agents", "operator": "Exists", "effect": "NoSchedule"}
ACTOR_TOLERATION = {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                    ]
                }
            ]
        }
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"team": "reviews"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    },
}
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": {"matchLabels": {"helmr.dev/component": "runner"}},
}


def pod_of(pod: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The runner pod of an echo Actor whose ``spec.pod`` is ``pod``."""
    actor_spec = {"pod": pod} if pod is not None else {}
    return pods.build_runner_pod_spec(runner_spec(actor_spec, **fields))


def test_a_runner_pod_has_no_placement_unless_one_is_set() -> None:
    spec = pod_of()["spec"]
    for name in (
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "imagePullSecrets",
        "runtimeClassName",
        "priorityClassName",
    ):
        assert name not in spec, name
    assert pod_of()["metadata"].get("annotations") is None


def test_a_runner_pod_gets_the_node_selector_and_tolerations_set() -> None:
    spec = pod_of(node_selector={"pool": "agents"}, tolerations=(TOLERATION,))["spec"]
    assert spec["nodeSelector"] == {"pool": "agents"}
    assert spec["tolerations"] == [TOLERATION]


def test_the_actors_settings_reach_its_runner_pods() -> None:
    pod = pod_of(
        {
            "imagePullSecrets": [{"name": "registry"}],
            "runtimeClassName": "gvisor",
            "priorityClassName": "agents-low",
            "nodeSelector": {"pool": "agents"},
            "tolerations": [ACTOR_TOLERATION],
            "affinity": AFFINITY,
            "topologySpreadConstraints": [SPREAD],
            "labels": {"team": "reviews"},
            "annotations": {"example.com/owner": "reviews"},
        }
    )
    spec = pod["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["priorityClassName"] == "agents-low"
    assert spec["nodeSelector"] == {"pool": "agents"}
    assert spec["tolerations"] == [ACTOR_TOLERATION]
    assert spec["affinity"] == AFFINITY
    assert spec["topologySpreadConstraints"] == [SPREAD]
    assert pod["metadata"]["labels"]["team"] == "reviews"
    assert pod["metadata"]["annotations"] == {"example.com/owner": "reviews"}


def test_the_image_is_pulled_as_the_actor_says() -> None:
    [container] = pod_of()["spec"]["containers"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    always = pods.build_runner_pod_spec(runner_spec({"imagePullPolicy": "Always"}))
    assert always["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_the_charts_node_selector_wins_for_a_key_both_set() -> None:
    spec = pod_of(
        {"nodeSelector": {"pool": "mine", "disk": "ssd"}},
        node_selector={"pool": "agents", "zone": "a"},
    )["spec"]
    assert spec["nodeSelector"] == {"pool": "agents", "disk": "ssd", "zone": "a"}


def test_the_charts_tolerations_come_first() -> None:
    spec = pod_of({"tolerations": [ACTOR_TOLERATION]}, tolerations=(TOLERATION,))["spec"]
    assert spec["tolerations"] == [TOLERATION, ACTOR_TOLERATION]


def test_helmrs_labels_win_over_the_actors() -> None:
    # Admission refuses helmr.dev/ keys; a model built in Python is not admitted,
    # so the merge itself must keep Helmr's selectors true.
    labels = pod_of({"labels": {"helmr.dev/component": "other", "helmr.dev/session": "x"}})[
        "metadata"
    ]["labels"]
    assert labels["helmr.dev/component"] == "runner"
    assert labels["helmr.dev/session"] == "s1"
    assert labels["helmr.dev/process-epoch"] == "1"


def test_no_setting_loosens_the_runners_security_or_identity() -> None:
    plain = pod_of()["spec"]
    # Fields outside the subset are not in the model: they are dropped on parsing.
    settled = pod_of(
        {
            "runtimeClassName": "gvisor",
            "hostNetwork": True,
            "serviceAccountName": "default",
            "automountServiceAccountToken": True,
            "securityContext": {"runAsUser": 0},
        }
    )["spec"]
    for name in (
        "serviceAccountName",
        "automountServiceAccountToken",
        "securityContext",
        "containers",
        "volumes",
        "enableServiceLinks",
    ):
        assert settled[name] == plain[name], name
    assert "hostNetwork" not in settled
