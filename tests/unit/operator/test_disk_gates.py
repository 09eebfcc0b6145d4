"""A runner pod made before its claim is bound waits gated, and is ungated once the
claim is Bound (helmr.operator.runners.disk_gates), over a stub Kube wrapper."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from helmr.kube.errors import translated
from helmr.operator.runners import pods
from helmr.operator.runners.disk_gates import DiskGates
from helmr.resources import ComputerSpec

from .stub_kube import StubKube
from .test_volumes import _runner_spec


class GateKube(StubKube):
    """One claim, Bound after ``unbound_reads`` reads; the gates removed, in order."""

    def __init__(self, unbound_reads: int) -> None:
        super().__init__()
        self.unbound_reads = unbound_reads
        self.reads = 0
        self.read_fails: set[int] = set()
        self.ungated: list[tuple[str, str, str, int]] = []

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        if self.reads in self.read_fails:
            raise translated(ApiException(status=503, reason="injected"))
        phase = "Pending" if self.reads <= self.unbound_reads else "Bound"
        return {"metadata": {"name": name}, "status": {"phase": phase}}

    async def remove_scheduling_gate(self, namespace: str, name: str, gate: str) -> None:
        self.ungated.append((namespace, name, gate, self.reads))


def test_a_pod_whose_claim_is_not_bound_is_made_gated_and_says_which_claim_it_waits_for() -> None:
    gated = pods.build_runner_pod_spec(_runner_spec(disk_bound=False))
    bound = pods.build_runner_pod_spec(_runner_spec())

    assert gated["spec"]["schedulingGates"] == [{"name": pods.DISK_GATE}]
    assert pods.gated_claim(gated) == "repo-disk-1"
    assert "schedulingGates" not in bound["spec"]
    assert pods.gated_claim(bound) is None
    # Ungated by the apiserver: the gate is gone from the pod as watched.
    assert pods.gated_claim(gated | {"spec": gated["spec"] | {"schedulingGates": []}}) is None


async def test_the_gate_is_removed_once_the_claim_is_bound_and_not_before() -> None:
    kube = GateKube(unbound_reads=3)
    kube.read_fails = {2}  # an apiserver hiccup on the way: read again
    gates = DiskGates(kube, give_up_after=60, first_wait=0.001)

    gates.follow("team", "s1-runner-1", "repo-disk-1")
    gates.follow("team", "s1-runner-1", "repo-disk-1")  # followed once
    await gates.drained()

    assert kube.ungated == [("team", "s1-runner-1", pods.DISK_GATE, 4)]


async def test_a_claim_never_bound_leaves_its_pod_gated_for_its_preparation_to_fail() -> None:
    kube = GateKube(unbound_reads=10**6)
    gates = DiskGates(kube, give_up_after=0.05, first_wait=0.001)

    gates.follow("team", "s1-runner-1", "repo-disk-1")
    await gates.drained()

    assert kube.ungated == []
    assert kube.reads > 1


@pytest.mark.parametrize("unbound_reads", [0, 10**6])
async def test_closing_ends_every_follow(unbound_reads: int) -> None:
    gates = DiskGates(GateKube(unbound_reads), give_up_after=60, first_wait=0.001)
    gates.follow("team", "a", "claim-a")
    gates.follow("team", "b", "claim-b")

    await gates.close()

    await gates.drained()  # nothing left to wait for


async def test_a_pod_made_before_its_claim_is_gated_only_where_disks_bind_as_made() -> None:
    async def binds_at_once(computer: ComputerSpec) -> bool:
        return computer.storage_class_name == "immediate"

    gates = DiskGates(GateKube(0), give_up_after=60, binds_at_once=binds_at_once)

    assert await gates.gated(ComputerSpec(storage_class_name="immediate"))
    assert not await gates.gated(ComputerSpec(storage_class_name="late"))
    assert not await DiskGates(GateKube(0), give_up_after=60).gated(ComputerSpec())
