"""Runner pods are placed where the operator's settings say (the chart's
``runner.nodeSelector`` and ``runner.tolerations``), and nowhere in particular
when they say nothing."""

from __future__ import annotations

from helmr.operator import pods
from tests.unit.operator.test_volumes import _runner_spec as runner_spec

TOLERATION = {"key": "helmr.dev/agents", "operator": "Exists", "effect": "NoSchedule"}


def test_a_runner_pod_has_no_placement_unless_one_is_set() -> None:
    spec = pods.build_runner_pod_spec(runner_spec())["spec"]
    assert "nodeSelector" not in spec
    assert "tolerations" not in spec


def test_a_runner_pod_gets_the_node_selector_and_tolerations_set() -> None:
    spec = pods.build_runner_pod_spec(
        runner_spec(node_selector={"pool": "agents"}, tolerations=(TOLERATION,))
    )["spec"]
    assert spec["nodeSelector"] == {"pool": "agents"}
    assert spec["tolerations"] == [TOLERATION]
