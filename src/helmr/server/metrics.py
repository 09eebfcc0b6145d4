"""Prometheus metrics of the API: requests by route and status, and their latency.

Each app owns its registry, so several apps in one process (tests, or the
operator embedding the API) never collide on metric names. The route label is
the route's template, never the raw path, to keep the label set bounded.
Collectors joined from outside may need a read before each scrape (``refresh``:
the operator's Session counts, read from the store).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED = "unmatched"
"""The route label of a request no route matched."""


async def nothing_to_refresh() -> None:
    return None


class Metrics:
    def __init__(
        self,
        collectors: tuple[Collector, ...] = (),
        refresh: Callable[[], Awaitable[None]] = nothing_to_refresh,
    ) -> None:
        self.registry = CollectorRegistry()
        self._refresh = refresh
        self.requests = Counter(
            "helmr_api_requests_total",
            "API requests by method, route template and response status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "helmr_api_request_duration_seconds",
            "API request latency by method and route template (an SSE stream counts its "
            "whole duration).",
            ["method", "route"],
            registry=self.registry,
        )
        for collector in collectors:
            self.registry.register(collector)
        # Each request's latency and count children, by method, route and status:
        # ``labels()`` checks and joins the labels and takes a lock on every call,
        # about 1% of a no-op Turn's instructions for two calls a request
        # (bench_turn_cpu.py --http). As bounded as the children prometheus keeps.
        self._children: dict[tuple[str, str, int], tuple[Histogram, Counter]] = {}

    async def exposition(self) -> bytes:
        await self._refresh()
        return generate_latest(self.registry)

    def observe(self, request: web.Request, status: int, seconds: float) -> None:
        """Counts aiohttp's ``request``, answered ``status`` after ``seconds``, by its route."""
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else UNMATCHED
        self.observe_route(request.method, route, status, seconds)

    def observe_route(self, method: str, route: str, status: int, seconds: float) -> None:
        """Counts a request of ``method`` on ``route`` (its template), answered ``status``
        after ``seconds``."""
        latency, requests = self._labelled(method, route, status)
        latency.observe(seconds)
        requests.inc()

    def _labelled(self, method: str, route: str, status: int) -> tuple[Histogram, Counter]:
        """The latency and count children of a request's labels, made once."""
        key = (method, route, status)
        children = self._children.get(key)
        if children is None:
            latency = self.latency.labels(method, route)
            requests = self.requests.labels(method, route, str(status))
            children = self._children[key] = (latency, requests)
        return children
