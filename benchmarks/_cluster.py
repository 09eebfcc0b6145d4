"""What a benchmark against the local cluster starts with: its command line (``--no-build``
and its own options), the cluster from ``KUBECONFIG`` with the CRDs applied and the
runner image of this checkout imported, and its clients.

Imported by the benchmark scripts (``benchmarks/`` is on ``sys.path`` when one runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from _common import new_api_client, prepare
from kubernetes import client
from tests.cluster import conftest


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    api: client.ApiClient
    core: client.CoreV1Api
    image: str
    """The runner image (of this checkout, unless ``--no-build``)."""


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The benchmark's command line (described by its module's first paragraph)."""
    made = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    made.add_argument(
        "--no-build", dest="build", action="store_false", help="reuse the imported runner image"
    )
    return made


def cluster(args: argparse.Namespace) -> Cluster:
    """The cluster ``KUBECONFIG`` names, ready to measure (``args.build``: the runner
    image built and imported first)."""
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    prepare(kubeconfig, args.build)
    api = new_api_client(kubeconfig)
    return Cluster(kubeconfig, api, client.CoreV1Api(api), conftest.RUNNER_IMAGE)


def run(
    made: argparse.ArgumentParser,
    bench: Callable[[argparse.Namespace, Cluster], Coroutine[Any, Any, None]],
) -> None:
    """Parses the command line and runs ``bench`` against the cluster."""
    args = made.parse_args()
    asyncio.run(bench(args, cluster(args)))
