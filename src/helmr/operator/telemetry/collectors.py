"""The operator's Prometheus collectors, made outside any registry: the API server's
``/metrics`` registry collects them (``OperatorMetrics.collectors``), so two control
planes in one process (the tests) never clash in a global one."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram


def counter(name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
    return Counter(name, documentation, labels, registry=None)


def gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
    return Gauge(name, documentation, labels, registry=None)


def histogram(
    name: str, documentation: str, buckets: Sequence[float], labels: Sequence[str] = ()
) -> Histogram:
    return Histogram(name, documentation, labels, buckets=buckets, registry=None)
