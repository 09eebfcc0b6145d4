"""Stubs of the operator's thin Kube wrapper, for the tests of its passes (no tests here)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from helmr.kube.client import ClassRef, Kube, PodRef
from helmr.kube.errors import KubeError, translated
from helmr.resources import API_VERSION, Actor, Resource, Session, Status, Workspace

DRIVER = "hostpath.csi.k8s.io"


class StubKube(Kube):
    """Records what the operator writes; names in ``failing`` answer 500. Its
    cluster saves disks as the local cluster does: a default StorageClass and
    VolumeSnapshotClass of one CSI driver (``snapshot_classes`` None: no
    VolumeSnapshot API is served)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.statuses: dict[tuple[str, str], Status] = {}
        self.deleted_pods: list[str] = []
        self.events: list[tuple[str, str, str, bool]] = []
        """Each Event recorded: its object (``Kind/name``), reason, message and
        whether it is a Warning."""
        self.failing: set[str] = set()
        # Its claims bind for the pod that mounts them: no runner pod waits gated
        # (helmr.operator.runners.disk_gates) unless a test makes it so.
        self.storage_classes = (
            ClassRef("helmr-hostpath", DRIVER, default=True, binds_at_once=False),
        )
        self.snapshot_classes: tuple[ClassRef, ...] | None = (
            ClassRef("helmr-hostpath", DRIVER, default=True),
        )
        self.class_reads = 0

    async def list_storage_classes(self) -> tuple[ClassRef, ...]:
        self.class_reads += 1
        return self.storage_classes

    async def list_snapshot_classes(self) -> tuple[ClassRef, ...] | None:
        return self.snapshot_classes

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        if name in self.failing:
            raise translated(ApiException(status=500, reason="injected"))
        self.log.append(f"{kind.KIND}/{name}")
        self.statuses[(kind.KIND, name)] = status
        return True

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return None  # no resource to read back: the mirror writes its statuses afresh

    async def record_event(
        self,
        kind: type[Resource[Any, Any]],
        namespace: str,
        name: str,
        reason: str,
        message: str,
        *,
        warning: bool = False,
        **_: Any,
    ) -> None:
        self.log.append("event")
        self.events.append((f"{kind.KIND}/{name}", reason, message, warning))

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        return []

    async def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> None:
        self.deleted_pods.append(name)


DYING = "dying"


def terminating(namespace: str) -> KubeError:
    """The apiserver's answer to a create in a namespace being deleted."""
    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "message": f"unable to create new content in namespace {namespace}"
            " because it is being terminated",
            "reason": "Forbidden",
            "details": {
                "causes": [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ]
            },
            "code": 403,
        }
    )
    return translated(error)


def any_resource(kind: type[Any], namespace: str, name: str) -> Any:
    """A Session, Actor or Workspace of that name, as if it existed; None for other kinds."""
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    manifest: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind.KIND, "metadata": meta}
    if kind is Session:
        manifest["spec"] = {"actorRef": {"name": "reviewer"}, "workspace": "ws"}
    elif kind is Actor:
        manifest["spec"] = {"image": "runner:dev", "entrypoint": "echo.echo:echo"}
    elif kind is Workspace:
        manifest["spec"] = {}
    else:
        return None
    return kind.from_manifest(manifest)


class ClusterKube(StubKube):
    """Every object the supervisor reads exists; creates in ``DYING`` are refused."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[str] = []
        self.refused: list[str] = []

    def _create(self, namespace: str, what: str) -> None:
        if namespace == DYING:
            self.refused.append(what)
            raise terminating(namespace)
        self.created.append(f"{namespace}/{what}")

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return any_resource(kind, namespace, name)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> None:
        self._create(namespace, "claim")

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        return []

    async def ensure_service_account(self, namespace: str, body: dict[str, Any]) -> None:
        self._create(namespace, "serviceaccount")

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        self._create(namespace, "pod")
        return "uid"

    async def record_event(self, kind: Any, namespace: str, *_: Any, **__: Any) -> None:
        self._create(namespace, "event")
