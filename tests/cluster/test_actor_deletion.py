"""Actors carry no finalizer, so they and their namespace delete while no
operator runs (a stopped or uninstalled Helmr must not wedge them).

The Actor's Accepted recheck was a kopf timer, for which kopf put its finalizer
on every Actor; an upgraded install still has such Actors, from which the
operator removes that finalizer once it sees them.

The control plane here is one of this test's own, serving only this test's
namespace: the test stops it, which the shared operator's tests must not see.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from helmr.resources import ACTORS, API_VERSION, GROUP, VERSION

from .conftest import OWN_PREFIX, Operator, create_namespace, delete_namespace
from .sessions import create_actor, eventually, operator_watches

KOPF_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
# Never pulled and on no node: the Actor is refused (ImageNotPresent), which is
# still a condition written, and no image need be built for this test.
IMAGE = "helmr.local/absent:dev"


def actor(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, namespace, ACTORS, name
        )
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return got


def finalizers(custom: client.CustomObjectsApi, namespace: str, name: str) -> list[str]:
    got = actor(custom, namespace, name)
    assert got is not None, f"Actor {name} is gone"
    return list(got["metadata"].get("finalizers") or [])


def namespace_gone(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


async def test_actors_carry_no_finalizer_and_delete_while_no_operator_runs(
    kubeconfig: str,
    crds: None,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    tmp_path: Path,
) -> None:
    custom = client.CustomObjectsApi(api_client)
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    # As the previous release left every Actor it had seen.
    upgraded = {
        "apiVersion": API_VERSION,
        "kind": "Actor",
        "metadata": {"name": "upgraded", "namespace": namespace, "finalizers": [KOPF_FINALIZER]},
        "spec": {"image": IMAGE, "imagePullPolicy": "Never", "entrypoint": "echo.echo:echo"},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, ACTORS, upgraded)
    operator = Operator.for_cluster(kubeconfig, tmp_path)
    try:
        operator.start(namespaces=namespace)
        create_actor(api_client, namespace, IMAGE)
        await operator_watches(api_client, namespace, "echo")
        # kopf adds a finalizer before it runs an object's first handler: by the
        # time Accepted is written, it would be there.
        assert finalizers(custom, namespace, "echo") == []
        await eventually(
            lambda: finalizers(custom, namespace, "upgraded") == [],
            what="the operator to remove the old finalizer",
        )
        await operator_watches(api_client, namespace, "upgraded")
    finally:
        operator.stop()

    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, ACTORS, "echo")
    await eventually(
        lambda: actor(custom, namespace, "echo") is None,
        timeout=30,
        what="the Actor deleted with no operator running",
    )
    delete_namespace(core, namespace)
    await eventually(
        lambda: namespace_gone(core, namespace),
        timeout=120,
        what="the namespace deleted with no operator running",
    )
