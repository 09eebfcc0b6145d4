"""One supervisor pass starts the runner pods of many waiting Sessions, and reads
the limits of many new ones, a few at a time, not one after another: each is
apiserver round trips, and a thousand Sessions opened at once would otherwise wait
minutes for their last pod."""

from __future__ import annotations

import asyncio
from typing import Any

from helmr.operator.at_once import AT_ONCE
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Actor
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import ClusterKube


class SlowPods(ClusterKube):
    """Each pod creation takes a round trip; counts how many were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            return await super().create_pod(namespace, body)
        finally:
            self.in_flight -= 1


async def test_waiting_sessions_start_a_bounded_few_at_a_time(h: Harness) -> None:
    kube = SlowPods()
    supervisor = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())
    sessions = [await h.session() for _ in range(AT_ONCE * 2)]
    for session in sessions:
        await h.control.enqueue(session.id, "go")

    await supervisor.reconcile()

    assert kube.created.count("team/pod") == len(sessions)
    # Bounded; how many meet at once depends on the store (its pool of connections).
    assert 1 < kube.most_in_flight <= AT_ONCE


class SlowActors(ClusterKube):
    """Each read of an Actor takes a round trip; counts how many were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most_in_flight = 0

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        if kind is not Actor:
            return await super().get_resource(kind, namespace, name)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            return await super().get_resource(kind, namespace, name)
        finally:
            self.in_flight -= 1


async def test_new_sessions_limits_are_read_a_bounded_few_at_a_time(h: Harness) -> None:
    kube = SlowActors()
    supervisor = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())
    for _ in range(AT_ONCE * 2):
        await h.session()

    await supervisor.reconcile()

    assert await h.control.sessions_without_limits() == []
    assert 1 < kube.most_in_flight <= AT_ONCE
