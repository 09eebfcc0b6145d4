"""What a runner pod says about its preparation: started, failed for good, or why pending.

A pod is prepared once its runner container has started. These container
waiting reasons mean it will not start without a change (a new image, a
fixed Secret or ConfigMap): the kubelet would retry forever, so each one is
reported as a failed preparation at once, and the Actor's ``retry`` policy
decides what follows. A pod pending for any other reason (unschedulable,
a slow pull) fails only at the preparation deadline, with the scheduler's
message or the container's waiting reason as the detail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FAILED_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def container_started(pod: Mapping[str, Any]) -> bool:
    """Whether the runner container has started (is running, or ran and ended)."""
    state = _container_state(pod)
    return "running" in state or "terminated" in state


def failed_preparation(pod: Mapping[str, Any]) -> str | None:
    """The detail of a preparation that cannot succeed, or None."""
    waiting = _container_state(pod).get("waiting") or {}
    if waiting.get("reason") not in FAILED_WAITING_REASONS:
        return None
    return _waiting_detail(pod, waiting)


def pending_detail(pod: Mapping[str, Any] | None) -> str:
    """Why a pod is not running yet: the scheduler's message, else its container's
    waiting reason, else its phase."""
    if pod is None:
        return "its runner pod does not exist"
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"{condition.get('reason', 'Unschedulable')}: {condition.get('message', '')}"
    waiting = _container_state(pod).get("waiting")
    if waiting:
        return _waiting_detail(pod, waiting)
    return f"its runner pod is {status.get('phase', 'Pending')}"


def _waiting_detail(pod: Mapping[str, Any], waiting: Mapping[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    image = containers[0].get("image", "?")
    message = waiting.get("message") or ""
    return f"{waiting.get('reason')}: image {image}" + (f": {message}" if message else "")


def _container_state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = (pod.get("status") or {}).get("containerStatuses") or []
    state: Mapping[str, Any] = (containers[0].get("state") or {}) if containers else {}
    return state
