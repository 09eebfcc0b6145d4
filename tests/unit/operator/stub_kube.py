"""A stub of the operator's thin Kube wrapper, for the tests of its passes (no tests here)."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from helmr.operator.kube import Kube, PodRef
from helmr.resources import Resource, Status


class StubKube(Kube):
    """Records what the operator writes; names in ``failing`` answer 500."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.statuses: dict[tuple[str, str], Status] = {}
        self.deleted_pods: list[str] = []
        self.failing: set[str] = set()

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        if name in self.failing:
            raise ApiException(status=500, reason="injected")
        self.log.append(f"{kind.KIND}/{name}")
        self.statuses[(kind.KIND, name)] = status
        return True

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return None  # no resource to read back: the mirror writes its statuses afresh

    async def record_event(self, *args: Any, **kwargs: Any) -> None:
        self.log.append("event")

    async def list_pods(self, namespace: str | None, selector: str) -> list[PodRef]:
        return []

    async def delete_pod(
        self, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> None:
        self.deleted_pods.append(name)
