"""The control plane that ``bench_scale.py`` measures, run as its own process (its RSS
is then its own): the store (SQLite or PostgreSQL), Control, the REST and runner
API, and the status mirror, with its interval and cursors, writing to a Kube that
counts what it would have written to the apiserver.

Not measured here: the supervisor (no pods exist; each session's process is
started once, in the store, when seeded) and kopf's handlers. Runner tokens are
one shared static token, not projected service-account tokens with TokenReview.

    python benchmarks/_scale_plane.py STORE PORT TOKEN [--api-turn-resources] [--count] \
        [--no-mirror] [--loop uvloop]

``STORE`` is a SQLite path or a ``postgresql://`` URL. It prints ``ready`` once it
serves; ``GET /bench/writes`` answers the would-be apiserver writes so far, and
``GET /bench/passes`` each status mirror pass so far: [Sessions, seconds]; with
``--count``, ``GET /bench/counts`` what it did so far (``_plane_counts.py``).
``--no-mirror``: a second replica (the leader alone runs the status mirror).
``--loop``: the event loop it runs on (``_loops.py``), the product's by default.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _collector import settle_collector
from _loops import LOOPS, PRODUCT
from _loops import run as run_on
from _plane_counts import install as install_counts
from aiohttp import web
from tests.compose import open_plane, serving, static_app

from helmr.kube.client import Kube
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Resource
from helmr.server import Grant, SessionNames, User

WRITES_ROUTE = "/bench/writes"
PASSES_ROUTE = "/bench/passes"


class CountingKube(Kube):
    """Counts the writes the mirror makes, by kind; answers them as the apiserver
    would when every object exists (reads find nothing: statuses are written afresh)."""

    def __init__(self) -> None:
        self.writes: Counter[str] = Counter()

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return None

    async def create_resource(self, resource: Any) -> Any:
        self.writes[f"create {resource.PLURAL}"] += 1
        return None

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        self.writes[f"patch {kind.PLURAL}/status"] += 1
        return True

    async def record_event(self, *args: Any, **kwargs: Any) -> None:
        self.writes["create events"] += 1


class AnyRunner:
    """Runner tokens: one shared token is every session's runner (the fleet's)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify(self, session_id: str, epoch: int, token: str) -> bool:
        return token == self._token


async def serve(
    store: str, port: int, token: str, api_turn_resources: bool, count: bool, mirrors: bool
) -> None:
    kube = CountingKube()
    async with open_plane(store) as plane:
        mirror = CustomResourceMirror(kube, api_turn_resources=api_turn_resources)
        sync = StatusSync(
            plane.control, mirror, OperatorMetrics(), wake=lambda changed: None, interval=0.5
        )
        # Where each Session is, read before listening as the control plane does
        # (ControlPlane._serve): otherwise each Session's first Turn reads it.
        names = SessionNames(plane.control)
        await names.load()
        app = static_app(
            plane.control,
            {token: Grant(User("bench"))},
            AnyRunner(token),
            mirror=mirror,
            session_names=names,
        )

        # Each pass of the status mirror: how many Sessions it took, how long it took.
        passes: list[tuple[int, float]] = []
        one_pass = sync.sync

        async def timed_pass(changed: set[str]) -> None:
            began = time.monotonic()
            await one_pass(changed)
            passes.append((len(changed), time.monotonic() - began))

        sync.sync = timed_pass  # type: ignore[method-assign]

        async def writes(_: web.Request) -> web.Response:
            return web.json_response(dict(kube.writes))

        async def pass_times(_: web.Request) -> web.Response:
            return web.json_response(passes)

        app.router.add_get(WRITES_ROUTE, writes)
        app.router.add_get(PASSES_ROUTE, pass_times)
        if count:
            install_counts(app, plane.store)
        settle_collector()
        async with serving(app, port=port):
            mirroring = asyncio.create_task(sync.run() if mirrors else asyncio.Event().wait())
            print("ready", flush=True)
            try:
                await asyncio.Event().wait()  # until the benchmark ends this process
            finally:
                mirroring.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("port", type=int)
    parser.add_argument("token")
    parser.add_argument("--api-turn-resources", action="store_true")
    parser.add_argument("--count", action="store_true", help="serve /bench/counts")
    parser.add_argument("--no-mirror", action="store_true", help="run no status mirror")
    parser.add_argument("--loop", choices=list(LOOPS), default=PRODUCT)
    args = parser.parse_args()
    run_on(
        serve(
            args.store,
            args.port,
            args.token,
            args.api_turn_resources,
            args.count,
            not args.no_mirror,
        ),
        args.loop,
    )


if __name__ == "__main__":
    main()
