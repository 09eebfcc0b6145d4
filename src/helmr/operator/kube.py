"""A thin async face over the Kubernetes client: only the calls Helmr makes.

The official client is synchronous; every call runs in a worker thread so the
control plane's one event loop never blocks on the apiserver.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from helmr.resources import GROUP, VERSION


def load_config() -> client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    labels: dict[str, str]
    deleting: bool


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    # --- custom resources

    async def get_custom(self, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: object = await asyncio.to_thread(
                self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return cast(dict[str, Any], obj)

    async def create_custom(
        self, namespace: str, plural: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        obj: object = await asyncio.to_thread(
            self.custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
        )
        return cast(dict[str, Any], obj)

    async def patch_status(
        self, namespace: str, plural: str, name: str, patch: dict[str, Any]
    ) -> bool:
        """Merge-patches a CR's status; False when the CR is gone."""
        try:
            await asyncio.to_thread(
                self.custom.patch_namespaced_custom_object_status,
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                patch,
            )
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    # --- pods and secrets

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        if namespace is None:
            pods = await asyncio.to_thread(
                self.core.list_pod_for_all_namespaces, label_selector=selector
            )
        else:
            pods = await asyncio.to_thread(
                self.core.list_namespaced_pod, namespace, label_selector=selector
            )
        refs = []
        for pod in pods.items:
            meta = pod.metadata or client.V1ObjectMeta()
            refs.append(
                PodRef(
                    namespace=str(meta.namespace),
                    name=str(meta.name),
                    labels=dict(meta.labels or {}),
                    deleting=meta.deletion_timestamp is not None,
                )
            )
        return refs

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> None:
        # The client accepts plain manifests as well as its model classes.
        await asyncio.to_thread(self.core.create_namespaced_pod, namespace, cast(Any, body))

    async def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> None:
        try:
            await asyncio.to_thread(
                self.core.delete_namespaced_pod,
                name,
                namespace,
                grace_period_seconds=grace_seconds,
            )
        except ApiException as e:
            if e.status != 404:
                raise

    async def ensure_secret(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.core.create_namespaced_secret, namespace, cast(Any, body))
        except ApiException as e:
            if e.status != 409:
                raise

    # --- Kubernetes Events on our resources, for `kubectl describe`

    async def record_event(
        self, involved: dict[str, Any], reason: str, message: str, *, warning: bool = False
    ) -> None:
        meta = involved["metadata"]
        now = datetime.now(UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{meta['name']}.", namespace=meta["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=involved["apiVersion"],
                kind=involved["kind"],
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message,
            type="Warning" if warning else "Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component="helmr"),
        )
        await asyncio.to_thread(self.core.create_namespaced_event, meta["namespace"], event)
