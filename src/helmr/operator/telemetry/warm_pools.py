"""Metrics of the Actors' warm pools (:mod:`helmr.operator.runners.warm_pools`), over
every Actor (an Actor's name is user input: never a label; its status says its own)."""

from __future__ import annotations

from prometheus_client.registry import Collector

from helmr.operator.telemetry.collectors import counter, gauge, histogram

REPLACED_REASONS = ("changed", "ended")


class WarmPoolMetrics:
    def __init__(self) -> None:
        self.size = gauge(
            "helmr_warm_pool_size",
            "Pooled runner pods the Actors' warm pools ask for (spec.warmPool.size, summed).",
        )
        self.ready = gauge(
            "helmr_warm_pool_ready",
            "Pooled runner pods Running and not adopted yet, at the last pool pass.",
        )
        self.adopted = counter(
            "helmr_warm_pool_adoptions",
            "New Sessions' first processes that adopted a pooled runner pod.",
        )
        self.misses = counter(
            "helmr_warm_pool_misses",
            "New Sessions of an Actor with a warm pool that found no pooled pod ready and"
            " started cold.",
        )
        self.refills = counter(
            "helmr_warm_pool_refills",
            "Pooled runner pods created (with their claims) to bring a pool to its size.",
        )
        self.replaced = counter(
            "helmr_warm_pool_replaced",
            "Pooled runner pods deleted before adoption, by reason (changed: the Actor's"
            " spec no longer makes that pod; ended: it stopped or failed).",
            ["reason"],
        )
        self.adoption_seconds = histogram(
            "helmr_warm_pool_adoption_seconds",
            "An adoption from the supervisor's start of it to its commit (the pooled pod's"
            " and claim's relabelling and the store's transaction): then the pod's runner"
            " has its Session.",
            (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        for reason in REPLACED_REASONS:
            self.replaced.labels(reason)

    @property
    def collectors(self) -> list[Collector]:
        return [
            self.size,
            self.ready,
            self.adopted,
            self.misses,
            self.refills,
            self.replaced,
            self.adoption_seconds,
        ]
