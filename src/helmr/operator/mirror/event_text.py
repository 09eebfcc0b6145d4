"""The Kubernetes Event a timeline fact becomes: a CamelCase reason and a sentence a person reads.

Turns are named by their resource name (``Turn review-1 completed``), codes
are spelled in plain words, and failures, holds and losses are warnings. Each
Turn gives at most one Event (its outcome); ``per_turn=False`` gives none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helmr.events import Event, EventKind
from helmr.operator.mirror.conditions import interrupted, words
from helmr.states import FailureReason, InterruptReason

# How a Session closed, as it reads after "closed".
CLOSED_HOW = {"close": "after its queued Turns finished", "cancel": "by cancel", "idle": "idle"}


@dataclass(frozen=True)
class KubeEvent:
    reason: str
    message: str
    warning: bool = False


def kube_event(
    event: Event, turn_name: Callable[[str], str], *, per_turn: bool = True
) -> KubeEvent | None:
    """The Event to record for ``event``, or None when it is not worth one."""
    data: dict[str, Any] = event.data if isinstance(event.data, dict) else {}
    if event.turn_id is not None and event.kind.startswith("turn."):
        if not per_turn:
            return None
        return _turn_event(event.kind, f"Turn {turn_name(event.turn_id)}", data)
    return _session_event(event, data, turn_name)


def _turn_event(kind: EventKind, turn: str, data: dict[str, Any]) -> KubeEvent | None:
    reason = data.get("reason")
    because = f": {words(reason)}" if isinstance(reason, str) else ""
    if kind == EventKind.TURN_COMPLETED:
        return KubeEvent("TurnCompleted", f"{turn} completed")
    if kind == EventKind.TURN_FAILED:
        error = data.get("error")
        detail = f": {error.get('message')}" if isinstance(error, dict) else ""
        return KubeEvent("TurnFailed", f"{turn} failed{detail}", warning=True)
    if kind == EventKind.TURN_INTERRUPTED:
        message = f"{turn} {interrupted(reason if isinstance(reason, str) else None)}"
        return KubeEvent("TurnInterrupted", message, warning=True)
    if kind == EventKind.TURN_CANCELLED:
        return KubeEvent("TurnCancelled", f"{turn} was cancelled{because}")
    return None


def _session_event(
    event: Event, data: dict[str, Any], turn_name: Callable[[str], str]
) -> KubeEvent | None:
    hold = data.get("holdId")
    process = f"Runner process {data.get('processEpoch')}"
    resume = f"; resume with spec.resume.holdId: {hold}"
    if event.kind == EventKind.SESSION_INTERRUPT:
        stopping = (
            "no Turn was running"
            if event.turn_id is None
            else f"Turn {turn_name(event.turn_id)} is stopping"
        )
        return KubeEvent("SessionHeld", f"Interrupted, {stopping}{resume}", warning=True)
    if event.kind == EventKind.SESSION_RESUME:
        return KubeEvent("SessionResumed", f"Hold {hold} released; queued Turns run again")
    if event.kind == EventKind.SESSION_CLOSED:
        how = CLOSED_HOW.get(str(data.get("how")), "")
        return KubeEvent("SessionClosed", f"Session closed {how}".rstrip())
    if event.kind == EventKind.SESSION_PROCESS_FAILED:
        reason = str(data.get("reason", InterruptReason.PROCESS_FAILED))
        if reason == FailureReason.EXECUTION_LOST:
            return None  # session.execution_lost, recorded with it, says so
        failed = f"{process} failed: {words(reason)}"
        if hold:
            message = f"{failed}; three consecutive failures hold the Session{resume}"
            return KubeEvent("SessionHeld", message, warning=True)
        return KubeEvent("ProcessFailed", failed, warning=True)
    if event.kind == EventKind.SESSION_EXECUTION_LOST:
        return KubeEvent("ExecutionLost", _lost(process, data), warning=True)
    if event.kind == EventKind.SESSION_RECOVERY_GAP and hold:
        message = f"Completed Turns may have lost files with the Computer{resume}"
        return KubeEvent("SessionHeld", message, warning=True)
    return None


def _lost(process: str, data: dict[str, Any]) -> str:
    """What an execution loss restored the disk from; plainly that nothing was
    saved when the cluster cannot save it (``savesUnavailable``)."""
    lost = f"{process} was lost (its pod was evicted or deleted, or its node was lost)"
    version = data.get("computerVersion")
    unavailable = data.get("savesUnavailable")
    if unavailable and not version:
        return (
            f"{lost}; nothing was saved, the next runner starts from an empty disk: {unavailable}"
        )
    restore = f"save {version}" if version else "a fresh disk"
    later = f" (nothing was saved after it: {unavailable})" if unavailable else ""
    return f"{lost}; the next runner starts from {restore}{later}"
