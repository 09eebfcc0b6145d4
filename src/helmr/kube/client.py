"""A thin async face over the Kubernetes client: only the calls Helmr makes.

The official client is synchronous; every call runs on a thread of
:mod:`helmr.kube.threads` so the control plane's one event loop never blocks on
the apiserver.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from helmr.kube import threads as kube_threads
from helmr.kube.errors import Conflict, Forbidden, NotFound
from helmr.kube.snapshots import (
    SNAPSHOT_CLASSES,
    SNAPSHOT_CONTENTS,
    SNAPSHOT_GROUP,
    SNAPSHOT_VERSION,
    SNAPSHOTS,
)
from helmr.resources import API_VERSION, GROUP, VERSION, Resource, Status

if TYPE_CHECKING:
    # Imported where called: the client costs a cold start about 0.5 s of imports,
    # which ``helmr dev`` (these modules, never a cluster) does not pay.
    from kubernetes.client import ApiClient as ApiClient

R = TypeVar("R", bound=Resource[Any, Any])
S = TypeVar("S", bound=Status)


def namespace_terminating(error: BaseException) -> bool:
    """Whether ``error`` is the apiserver refusing a create because the namespace
    is being deleted (403 with the cause ``NamespaceTerminating``) or is gone
    (404 naming the namespace itself, not the object)."""
    if isinstance(error, NotFound):
        return bool(error.details.get("kind") == "namespaces")
    if isinstance(error, Forbidden):
        causes = error.details.get("causes") or []
        return any(cause.get("reason") == "NamespaceTerminating" for cause in causes)
    return False


HELD_POLICY = "workspaces.helmr.dev-held"
"""The ValidatingAdmissionPolicy refusing the deletion of a Workspace whose status
names a holder (charts/helmr/policies/workspace-deletion.yaml)."""


def refused_as_held(error: BaseException) -> bool:
    """Whether ``error`` is the admission policy refusing to delete a held Workspace
    (403, naming the policy), not a refusal of Helmr's own rights."""
    return isinstance(error, Forbidden) and f"'{HELD_POLICY}'" in error.message


def load_config() -> ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient(kube_threads.api_configuration())


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    labels: dict[str, str]
    deleting: bool


FIELD_MANAGER = "helmr"
APPLY_PATCH = "application/apply-patch+yaml"
"""Server-side apply's content type (JSON is YAML)."""

MERGE_PATCH = "application/merge-patch+json"
"""A JSON merge patch: a list given (``ownerReferences``) replaces the object's whole."""

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
"""A strategic merge patch: a list keyed by name (``schedulingGates``) is merged
item by item, so one item can be removed and the others kept."""

METADATA_ONLY = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
"""A list's ``Accept``: the apiserver answers with each object's metadata only."""


def pod_refs(listing: dict[str, Any]) -> list[PodRef]:
    """The pods of a ``PartialObjectMetadataList`` (or a ``PodList``)."""
    refs = []
    for item in listing.get("items") or []:
        meta = item.get("metadata") or {}
        refs.append(
            PodRef(
                namespace=str(meta.get("namespace")),
                name=str(meta.get("name")),
                labels=dict(meta.get("labels") or {}),
                deleting=meta.get("deletionTimestamp") is not None,
            )
        )
    return refs


@dataclass(frozen=True, slots=True)
class ClassRef:
    """A StorageClass (``driver``: its provisioner) or a VolumeSnapshotClass (its
    CSI driver), and whether it is marked its kind's default."""

    name: str
    driver: str
    default: bool
    binds_at_once: bool = True
    """A StorageClass's claims are bound as they are made (``volumeBindingMode``
    Immediate), not once a pod that mounts one is scheduled (WaitForFirstConsumer)."""


DEFAULT_STORAGE_CLASS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
DEFAULT_SNAPSHOT_CLASS = ("snapshot.storage.kubernetes.io/is-default-class",)


def _marked(annotations: dict[str, str] | None, keys: tuple[str, ...]) -> bool:
    return any((annotations or {}).get(key) == "true" for key in keys)


class Kube:
    def __init__(self, api: ApiClient) -> None:
        from kubernetes import client

        self._api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.storage = client.StorageV1Api(api)
        self.networking = client.NetworkingV1Api(api)

    # --- custom resources: the operator's own code uses the typed methods, which
    # read and write helmr.resources models; the plain ones are their transport.

    async def get_resource(self, kind: type[R], namespace: str, name: str) -> R | None:
        """The resource, or None when there is none."""
        obj = await self.get_custom(namespace, kind.PLURAL, name)
        return None if obj is None else kind.from_manifest(obj)

    async def create_resource(self, resource: R) -> R | None:
        """The created resource, or None when one of that name existed already."""
        try:
            obj = await self.create_custom(
                resource.metadata.namespace or "", resource.PLURAL, resource.to_manifest()
            )
        except Conflict:
            return None
        return type(resource).from_manifest(obj)

    async def patch_resource_status(
        self, kind: type[Resource[Any, S]], namespace: str, name: str, status: S
    ) -> bool:
        """Merge-patches the status with the fields set in ``status``; False when the
        resource is gone."""
        return await self.patch_status(namespace, kind.PLURAL, name, status.status_patch())

    async def delete_resource(self, kind: type[R], namespace: str, name: str) -> None:
        """Deletes the resource (its dependents are garbage-collected); gone already is fine."""
        await _absent_as_ok(
            self.custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            kind.PLURAL,
            name,
        )

    async def get_custom(self, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: object = await kube_threads.call(
                self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
            )
        except NotFound:
            return None
        return cast(dict[str, Any], obj)

    async def create_custom(
        self, namespace: str, plural: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        obj: object = await kube_threads.call(
            self.custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
        )
        return cast(dict[str, Any], obj)

    async def patch_status(
        self, namespace: str, plural: str, name: str, patch: dict[str, Any]
    ) -> bool:
        """Merge-patches a CR's status; False when the CR is gone."""
        try:
            await kube_threads.call(
                self.custom.patch_namespaced_custom_object_status,
                GROUP,
                VERSION,
                namespace,
                plural,
                name,
                patch,
            )
        except NotFound:
            return False
        return True

    # --- nodes: what the Actor's Accepted condition may know of images

    async def node_images(self) -> dict[str, list[list[str]]]:
        """Each node's images, each as its names, as its kubelet reports them (the
        largest first, at most ``nodeStatusMaxImages`` of them: 50 by default)."""
        nodes = await kube_threads.call(self.core.list_node)
        return {
            str(node.metadata and node.metadata.name): [
                list(image.names or []) for image in (node.status and node.status.images) or []
            ]
            for node in nodes.items
        }

    # --- storage and snapshot classes: whether the Computer disk can be saved

    async def list_storage_classes(self) -> tuple[ClassRef, ...]:
        from kubernetes import client

        listing = await kube_threads.call(self.storage.list_storage_class)
        return tuple(
            ClassRef(
                name=str(meta.name),
                driver=str(sc.provisioner),
                default=_marked(meta.annotations, DEFAULT_STORAGE_CLASS),
                binds_at_once=sc.volume_binding_mode != "WaitForFirstConsumer",
            )
            for sc in listing.items
            for meta in [sc.metadata or client.V1ObjectMeta()]
        )

    async def list_snapshot_classes(self) -> tuple[ClassRef, ...] | None:
        """The VolumeSnapshotClasses; None when the cluster serves no VolumeSnapshot API."""
        listing = await _absent_as_none(
            self.custom.list_cluster_custom_object, *_SNAPSHOTS, SNAPSHOT_CLASSES
        )
        if listing is None:
            return None
        return tuple(
            ClassRef(
                name=str(item["metadata"]["name"]),
                driver=str(item.get("driver")),
                default=_marked(item["metadata"].get("annotations"), DEFAULT_SNAPSHOT_CLASS),
            )
            for item in listing.get("items") or []
        )

    # --- pods and secrets

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        """The pods' metadata only, parsed off the event loop: the client's models of
        whole pods cost several times the time and memory (docs/sizing.md), and the
        supervisor lists every runner pod at each start."""

        def listed() -> list[PodRef]:
            options: dict[str, Any] = {
                "label_selector": selector,
                "_headers": {"Accept": METADATA_ONLY},
                "_preload_content": False,
            }
            # Any: unparsed (_preload_content), the answer is the HTTP response.
            answer: Any
            if namespace is None:
                answer = self.core.list_pod_for_all_namespaces(**options)
            else:
                answer = self.core.list_namespaced_pod(namespace, **options)
            return pod_refs(json.loads(answer.data))

        return await kube_threads.call(listed)

    async def list_whole_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The pods, whole (status included): for the few a warm pool keeps."""
        pods = await kube_threads.call(
            self.core.list_namespaced_pod, namespace, label_selector=selector
        )
        wire = self._api.sanitize_for_serialization(pods)  # type: ignore[no-untyped-call]
        return cast(list[dict[str, Any]], wire.get("items") or [])

    async def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of the pod (its labels and owners: a pooled pod adopted)."""
        await _unparsed(
            self.core.patch_namespaced_pod, name, namespace, patch, _content_type=MERGE_PATCH
        )

    async def remove_scheduling_gate(self, namespace: str, name: str, gate: str) -> None:
        """Lets the scheduler place the pod as far as ``gate`` is concerned (any other
        gate stays); nothing if the pod is gone."""
        patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
        with contextlib.suppress(NotFound):
            await kube_threads.call(
                self.core.patch_namespaced_pod,
                name,
                namespace,
                patch,
                _content_type=STRATEGIC_MERGE_PATCH,
            )

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = await _absent_as_none(self.core.read_namespaced_pod, name, namespace)
        if pod is None:
            return None
        wire = self._api.sanitize_for_serialization(pod)  # type: ignore[no-untyped-call]
        return cast(dict[str, Any], wire)

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        """Creates the pod; its uid."""
        # The client accepts plain manifests as well as its model classes.
        pod = await _unparsed(self.core.create_namespaced_pod, namespace, cast(Any, body))
        return str(pod["metadata"]["uid"])  # the apiserver answers a create with the object

    async def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> None:
        with contextlib.suppress(NotFound):
            await _unparsed(
                self.core.delete_namespaced_pod,
                name,
                namespace,
                grace_period_seconds=grace_seconds,
            )

    async def ensure_service_account(self, namespace: str, body: dict[str, Any]) -> None:
        """Creates the service account unless it exists (create only: no reads needed)."""
        with contextlib.suppress(Conflict):
            await kube_threads.call(
                self.core.create_namespaced_service_account, namespace, cast(Any, body)
            )

    async def apply_network_policy(self, body: dict[str, Any]) -> None:
        """Server-side apply of the NetworkPolicy ``body`` as Helmr's field manager:
        created if missing, else made to say what ``body`` says (fields Helmr set
        before and ``body`` lacks are removed). ``force``: Helmr's word wins over an
        edit by hand."""
        meta = body["metadata"]
        await kube_threads.call(
            self.networking.patch_namespaced_network_policy,
            meta["name"],
            meta["namespace"],
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=APPLY_PATCH,
        )

    # --- Kubernetes Events on our resources, for `kubectl describe`

    async def record_event(
        self,
        kind: type[Resource[Any, Any]],
        namespace: str,
        name: str,
        reason: str,
        message: str,
        *,
        warning: bool = False,
        uid: str | None = None,
    ) -> None:
        """A Kubernetes Event about the resource ``kind`` ``namespace/name``; `kubectl
        describe` shows only the Events that name the object's ``uid``."""
        from kubernetes import client

        now = datetime.now(UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version=API_VERSION, kind=kind.KIND, name=name, namespace=namespace, uid=uid
            ),
            reason=reason,
            message=message,
            type="Warning" if warning else "Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component="helmr"),
        )
        await kube_threads.call(self.core.create_namespaced_event, namespace, event)

    # --- the Computer disk: claims and their snapshots

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        claim = await _absent_as_none(
            self.core.read_namespaced_persistent_volume_claim, name, namespace
        )
        if claim is None:
            return None
        wire = self._api.sanitize_for_serialization(claim)  # type: ignore[no-untyped-call]
        return cast(dict[str, Any], wire)

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> None:
        with contextlib.suppress(Conflict):  # made before, under this deterministic name
            await _unparsed(
                self.core.create_namespaced_persistent_volume_claim, namespace, cast(Any, body)
            )

    async def patch_claim(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of the claim (its labels and owners: a pooled claim adopted)."""
        await _unparsed(
            self.core.patch_namespaced_persistent_volume_claim,
            name,
            namespace,
            patch,
            _content_type=MERGE_PATCH,
        )

    async def get_secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's data (base64, as stored), or None when there is no such Secret."""
        secret = await _absent_as_none(self.core.read_namespaced_secret, name, namespace)
        return None if secret is None else dict(secret.data or {})

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        from kubernetes import client

        claims = await kube_threads.call(
            self.core.list_namespaced_persistent_volume_claim, namespace, label_selector=selector
        )
        return [str((claim.metadata or client.V1ObjectMeta()).name) for claim in claims.items]

    async def delete_claim(self, namespace: str, name: str) -> None:
        await _absent_as_ok(self.core.delete_namespaced_persistent_volume_claim, name, namespace)

    async def get_snapshot(self, namespace: str, name: str) -> dict[str, Any] | None:
        snapshot: dict[str, Any] | None = await _absent_as_none(
            self.custom.get_namespaced_custom_object, *_SNAPSHOTS, namespace, SNAPSHOTS, name
        )
        return snapshot

    async def get_snapshot_content(self, name: str) -> dict[str, Any] | None:
        """The VolumeSnapshotContent (cluster-scoped) ``name``, or None."""
        content: dict[str, Any] | None = await _absent_as_none(
            self.custom.get_cluster_custom_object, *_SNAPSHOTS, SNAPSHOT_CONTENTS, name
        )
        return content

    async def create_snapshot(self, namespace: str, body: dict[str, Any]) -> None:
        await _exists_as_ok(
            self.custom.create_namespaced_custom_object, *_SNAPSHOTS, namespace, SNAPSHOTS, body
        )

    async def delete_snapshot(self, namespace: str, name: str) -> None:
        await _absent_as_ok(
            self.custom.delete_namespaced_custom_object, *_SNAPSHOTS, namespace, SNAPSHOTS, name
        )


_SNAPSHOTS = (SNAPSHOT_GROUP, SNAPSHOT_VERSION)


async def _unparsed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``call(*args, **kwargs)`` in a thread, its answer as plain JSON rather than the
    client's model: making a ``V1Pod`` of a runner pod's answer takes ~9 ms of CPU
    (``json.loads`` 0.1 ms), the GIL held, and a pooled pod's adoption makes such
    answers (its pod relabelled, its refill made) as its runner's first calls come in
    (benchmarks/results.md, 4 December)."""

    def answered() -> dict[str, Any]:
        data = call(*args, _preload_content=False, **kwargs).data
        return cast(dict[str, Any], json.loads(data)) if data else {}

    return await kube_threads.call(answered)


async def _absent_as_none(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` in a thread; None when the object does not exist."""
    try:
        return await kube_threads.call(call, *args)
    except NotFound:
        return None


async def _absent_as_ok(call: Callable[..., Any], *args: Any) -> None:
    """A delete: an object already gone is deleted."""
    with contextlib.suppress(NotFound):
        await kube_threads.call(call, *args)


async def _exists_as_ok(call: Callable[..., Any], *args: Any) -> None:
    """A create under a deterministic name: an object already there was created before."""
    with contextlib.suppress(Conflict):
        await kube_threads.call(call, *args)
