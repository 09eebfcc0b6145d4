"""What the apiserver's Service proxy costs `kubectl helmr`: request latency to an
installed Helmr release, directly (the Service's ClusterIP) and through the
apiserver (``/api/v1/namespaces/NS/services/NAME:http/proxy/...``).

Finds the endpoint the way the plugin does (``helmr.kubectl.discovery``), then
times ``--requests`` sequential reads of one session id (``GET
/v1/sessions/{id}``: authenticated by Helmr, answered from its store; an
unknown id is Helmr's 404, the same round trip) on one kept-alive connection
per route, after ``--warmup`` untimed ones. Prints p50/p99 per route and the
proxy's added median. Run it where the ClusterIP is routable (a node; the
local cluster's host is one).

    .venv/bin/python benchmarks/bench_kubectl_route.py --service NS/NAME \\
        [--as-service-account NS/NAME] [--session ID] [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time

from helmr.client import Client
from helmr.errors import NotFound
from helmr.kubectl.discovery import Request, Route, endpoint

ROUTES: tuple[Route, ...] = ("direct", "apiserver")


async def latencies(
    route: Route, base: Request, session: str, requests: int, warmup: int
) -> list[float]:
    found = endpoint(
        Request(base.kubeconfig, base.context, None, base.service, base.service_account, route)
    )
    print(f"{route:>9}: {found.description}")
    async with Client(found.url, headers=found.headers, ssl=found.ssl) as client:
        ref = client.sessions.ref(session)
        times = []
        for i in range(warmup + requests):
            start = time.perf_counter()
            with contextlib.suppress(NotFound):
                await ref.retrieve()
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    parser.add_argument("--service", required=True, metavar="NAMESPACE/NAME")
    parser.add_argument("--as-service-account", dest="service_account")
    parser.add_argument("--session", default="ses_00000000000000000000000000")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    base = Request(args.kubeconfig, args.context, None, args.service, args.service_account)
    medians = {}
    for route in ROUTES:
        times = asyncio.run(latencies(route, base, args.session, args.requests, args.warmup))
        p50, p99 = statistics.median(times), statistics.quantiles(times, n=100)[98]
        medians[route] = p50
        print(
            f"{route:>9}: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms ({len(times)} requests)"
        )
    added = (medians["apiserver"] - medians["direct"]) * 1000
    print(f"the apiserver proxy adds {added:.1f} ms at the median")


if __name__ == "__main__":
    main()
