"""A namespace created while kopf starts watching namespaces is served
(helmr.operator.kopf.namespaces).

kopf lists the namespaces once at its start and again when its watch of them
begins; a namespace created between the two is in no listing kopf read before,
and it gets no watch event. Here the window is widened to 8 s (kopf's namespace
watch is held back by a ``sitecustomize`` on the operator's path, which also
says when the hold began: after kopf's first listing), and the namespace is
created inside it: it must be served once the watch begins.
"""

from __future__ import annotations

import time
from pathlib import Path

from kubernetes import client

from .conftest import OWN_PREFIX, Operator, create_namespace, delete_namespace
from .sessions import create_actor, eventually, operator_watches

HOLD_SECONDS = 8.0

# The operator's sitecustomize: kopf's namespace watch begins HOLD_SECONDS late,
# and the file HELD tells when the hold began.
HOLD_BACK_NAMESPACE_WATCH = """
import asyncio, os, pathlib
from kopf._core.reactor import queueing

_watcher = queueing.watcher

async def watcher(**kwargs):
    if kwargs["resource"].plural == "namespaces":
        pathlib.Path(os.environ["HELD"]).touch()
        await asyncio.sleep(float(os.environ["HOLD_SECONDS"]))
    return await _watcher(**kwargs)

queueing.watcher = watcher
"""


async def test_a_namespace_created_before_kopfs_namespace_watch_begins_is_served(
    kubeconfig: str,
    crds: None,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    runner_image: str,
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HOLD_BACK_NAMESPACE_WATCH)
    # Names of this test's own, so that no other control plane serves them.
    prefix = f"{OWN_PREFIX}late-"
    held = tmp_path / "held"
    operator = Operator.for_cluster(
        kubeconfig,
        tmp_path,
        PYTHONPATH=str(site),
        HELD=str(held),
        HOLD_SECONDS=str(HOLD_SECONDS),
    )
    operator.start(namespaces=f"{prefix}*")
    namespace = ""
    try:
        await eventually(held.exists, timeout=60, what="kopf to begin its namespace watch")
        began = time.monotonic()
        namespace = create_namespace(core, prefix=prefix)
        assert time.monotonic() - began < HOLD_SECONDS / 2, "the namespace came too late"
        await operator_watches(
            api_client, namespace, create_actor(api_client, namespace, runner_image)
        )
    finally:
        operator.stop()
        if namespace:
            delete_namespace(core, namespace)
