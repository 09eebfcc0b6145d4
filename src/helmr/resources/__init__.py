"""The Helmr custom resources as pydantic models: ``Actor``, ``Session``, ``Turn``, ``Workspace``.

The models are the single source of the CRDs in ``crds/`` (``python -m
helmr.resources`` writes them, ``--check`` verifies them). Python names are
snake_case; manifests are camelCase::

    session = Session.from_manifest(body)
    session.spec.actor_ref.name
    patch = SessionStatus(phase="closed", closed_how="cancel").status_patch()

CRD generation needs PyYAML and lives in ``helmr.resources.crd``, so importing
this package needs only pydantic.
"""

from helmr.resources.actor import (
    Actor,
    ActorSpec,
    ActorStatus,
    ComputerSpec,
    EnvVar,
    ResourceAmounts,
    ResourceRequirements,
    RetrySpec,
    WarmPoolSpec,
    WarmPoolStatus,
)
from helmr.resources.base import (
    API_VERSION,
    GROUP,
    VERSION,
    ObjectMeta,
    OwnerReference,
    Resource,
    Status,
    WireModel,
)
from helmr.resources.fields import Condition
from helmr.resources.runner_network import RunnerNetwork
from helmr.resources.runner_pod import RunnerPodSettings
from helmr.resources.session import (
    ActorRef,
    ClosedHow,
    DeclaredControl,
    DesiredState,
    EffectiveLimits,
    Hold,
    RefusedControl,
    ResumeRequest,
    Session,
    SessionPhase,
    SessionSpec,
    SessionStatus,
)
from helmr.resources.turn import (
    SessionRef,
    Turn,
    TurnError,
    TurnPhase,
    TurnSpec,
    TurnStatus,
)
from helmr.resources.workspace import Workspace, WorkspaceSpec, WorkspaceStatus
from helmr.states import HoldReason

ACTORS = Actor.PLURAL
SESSIONS = Session.PLURAL
TURNS = Turn.PLURAL
WORKSPACES = Workspace.PLURAL

__all__ = [
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
]
