"""The public facades export exactly the names they promise, and each resolves.

A name added to or dropped from a facade is a change of the public API: this
test makes it a deliberate one (as httpx's ``test_exported_members`` does).
"""

from __future__ import annotations

from types import ModuleType

import pytest

import helmr.client
import helmr.errors
import helmr.resources
import helmr.runner

EXPECTED = {
    helmr.client: [
        "Actors",
        "Client",
        "Event",
        "EventKind",
        "EventPage",
        "Hold",
        "Message",
        "Run",
        "SecretKey",
        "SecretSource",
        "Sent",
        "Session",
        "SessionEvent",
        "SessionEventKind",
        "SessionEventPage",
        "SessionEvents",
        "SessionRef",
        "Sessions",
        "Started",
        "StopReceipt",
        "Turn",
        "TurnError",
        "TurnRef",
        "Workspace",
        "WorkspaceRef",
        "Workspaces",
    ],
    helmr.errors: [
        "UNAVAILABLE_STATUSES",
        "Conflict",
        "ErrorBody",
        "ErrorDetail",
        "Forbidden",
        "HelmrError",
        "HistoryUnavailable",
        "HoldMismatch",
        "HoldNotConverged",
        "InvalidInput",
        "MessageRejected",
        "MethodNotAllowed",
        "NotFound",
        "NotReady",
        "PayloadTooLarge",
        "QueueFull",
        "ReceiveTimeout",
        "SessionHeld",
        "SessionNotOpen",
        "StaleEpoch",
        "TurnNotActive",
        "TurnSettling",
        "Unauthenticated",
        "Unavailable",
        "UnsupportedMediaType",
        "from_json",
    ],
    helmr.resources: [
        "ACTORS",
        "API_VERSION",
        "GROUP",
        "SESSIONS",
        "TURNS",
        "VERSION",
        "WORKSPACES",
        "Actor",
        "ActorRef",
        "ActorSpec",
        "ActorStatus",
        "ClosedHow",
        "ComputerSpec",
        "Condition",
        "DeclaredControl",
        "DesiredState",
        "EffectiveLimits",
        "EnvVar",
        "Hold",
        "HoldReason",
        "ObjectMeta",
        "OwnerReference",
        "RefusedControl",
        "Resource",
        "ResourceAmounts",
        "ResourceRequirements",
        "ResumeRequest",
        "RetrySpec",
        "RunnerNetwork",
        "RunnerPodSettings",
        "Session",
        "SessionPhase",
        "SessionRef",
        "SessionSpec",
        "SessionStatus",
        "Status",
        "Turn",
        "TurnError",
        "TurnPhase",
        "TurnSpec",
        "TurnStatus",
        "WarmPoolSpec",
        "WarmPoolStatus",
        "WireModel",
        "Workspace",
        "WorkspaceSpec",
        "WorkspaceStatus",
    ],
    helmr.runner: [
        "Actor",
        "Message",
        "MessageHandler",
        "MessageRejected",
        "Output",
        "ReceiveTimeout",
        "Session",
        "Signal",
        "Turn",
        "TurnNotActive",
        "actor",
    ],
}


@pytest.mark.parametrize("facade", list(EXPECTED), ids=lambda m: m.__name__)
def test_a_facade_exports_exactly_its_names_and_each_resolves(facade: ModuleType) -> None:
    assert facade.__all__ == EXPECTED[facade]
    for name in facade.__all__:
        assert getattr(facade, name) is not None, name
