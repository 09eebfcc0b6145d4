"""The ``Actor`` resource: how to run an actor's code and the limits its Sessions get."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from helmr.actor_limits import (
    DEFAULT_QUEUE_LIMIT,
    DEFAULT_RETRY_ATTEMPTS,
    IDLE_TIMEOUT,
    MAX_DURATION,
    MAX_TURN_DURATION,
    QUEUE,
    RETRY,
    TTL,
)
from helmr.resources.base import JsonDict, Resource, Status, WireModel, cel, rules
from helmr.resources.columns import AGE, column, condition
from helmr.resources.fields import (
    LABEL_NAME_SCHEMA,
    Conditions,
    DnsSubdomain,
    ObservedGeneration,
    Quantity,
)
from helmr.resources.runner_network import RunnerNetwork
from helmr.resources.runner_pod import RunnerPodSettings

# ``module:attr`` as in Python entry points: dotted identifiers on both sides.
_DOTTED_NAME = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
ENTRYPOINT_PATTERN = f"^{_DOTTED_NAME}:{_DOTTED_NAME}$"

# Limits shared with the Session's overrides, so an override can express whatever the Actor can.
IdleTimeoutSeconds = Annotated[int, Field(ge=IDLE_TIMEOUT.low, le=IDLE_TIMEOUT.high)]
MaxTurnDurationSeconds = Annotated[int, Field(ge=MAX_TURN_DURATION.low, le=MAX_TURN_DURATION.high)]
# Disk settings a Workspace may override.
AccessMode = Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]
KeepSaves = Annotated[int, Field(ge=1, le=100)]
SaveInterval = Annotated[int, Field(ge=0, le=86_400)]
"""Seconds: at most one save per this many (0: a save at every Turn's end)."""
UsedFraction = Annotated[float, Field(ge=0.01, le=1)]
"""A share of the Computer disk's size, used (``0.9``: 90%)."""
UsageInterval = Annotated[int, Field(ge=1, le=3600)]


def _requests_within_limits(resource: str) -> JsonDict:
    requests = f"self.requests.{resource}"
    limits = f"self.limits.{resource}"
    return cel(
        f"!has(self.requests) || !has(self.limits) || !has({requests}) || !has({limits})"
        f" || !isQuantity({requests}) || !isQuantity({limits})"
        f" || quantity({requests}).compareTo(quantity({limits})) <= 0",
        f"spec.resources.requests.{resource} must not exceed spec.resources.limits.{resource}",
        field_path=f".requests.{resource}",
    )


class ResourceAmounts(WireModel):
    """Amounts of compute resources, as Kubernetes quantities."""

    cpu: Quantity | None = Field(
        default=None, description="CPU, in cores or millicores (for example `500m` or `2`)."
    )
    memory: Quantity | None = Field(
        default=None, description="Memory, in bytes with an optional suffix (for example `512Mi`)."
    )


class ResourceRequirements(WireModel):
    """Compute resources of the runner container, as in a Pod's container resources."""

    model_config = ConfigDict(
        json_schema_extra=rules(_requests_within_limits("cpu"), _requests_within_limits("memory"))
    )

    requests: ResourceAmounts | None = Field(
        default=None, description="Resources the scheduler reserves for the runner container."
    )
    limits: ResourceAmounts | None = Field(
        default=None,
        description="Most the runner container may use; memory beyond it is OOM-killed.",
    )


class RetrySpec(WireModel):
    """How Helmr retries preparing a runner for a Session."""

    max_attempts: int | None = Field(
        default=None,
        ge=RETRY.low,
        le=RETRY.high,
        description=(
            "Attempts to prepare and start a runner process for a Session before the Session"
            " fails (preparation exhaustion). Process failures of a running Session are counted"
            " separately: three consecutive ones hold the Session. Unset: the actor's"
            f" `actor(retry=...)` once a Run of the Session reported it, else"
            f" {DEFAULT_RETRY_ATTEMPTS}."
        ),
    )
    backoff_seconds: int = Field(
        default=5,
        ge=0,
        le=300,
        description=(
            "Wait before the attempt after a failed preparation, doubled after each"
            " consecutive failure (at most five minutes)."
        ),
    )


class ComputerSpec(WireModel):
    """The Computer disk each Workspace of this Actor gets: a PVC, saved as VolumeSnapshots."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "!isQuantity(self.size) || quantity(self.size).isGreaterThan(quantity('0'))",
                "spec.computer.size must be greater than zero",
                field_path=".size",
            ),
            cel(
                "self.resolveAt < self.pauseAt && self.pauseAt <= self.stopAt",
                "spec.computer: resolveAt must be below pauseAt, and pauseAt at most stopAt",
            ),
        )
    )

    size: Quantity = Field(
        default="1Gi", description="Requested size of the Computer disk (for example `10Gi`)."
    )
    storage_class_name: DnsSubdomain | None = Field(
        default=None,
        description="StorageClass of the Computer disk's PVC. Unset: the cluster's default class.",
    )
    volume_snapshot_class_name: DnsSubdomain | None = Field(
        default=None,
        description=(
            "VolumeSnapshotClass used to save the Computer disk. Unset: the default class of"
            " the disk's CSI driver. Saves are VolumeSnapshots only: on a cluster without the"
            " VolumeSnapshot API or such a class the disk is never saved (the Actor's"
            " `SavesAvailable` condition says why) and an execution loss restarts it empty."
        ),
    )
    access_mode: AccessMode = Field(
        default="ReadWriteOnce",
        description="Access mode of the Computer disk's PVCs; one runner mounts it at a time.",
    )
    keep_saves: KeepSaves = Field(
        default=5,
        description=(
            "How many ready saves of each Workspace are kept; older ones are deleted."
            " The newest ready save, the one a restore uses, is always kept."
        ),
    )
    save_interval_seconds: SaveInterval = Field(
        default=0,
        description=(
            "The save policy. 0: a save at every Turn's end (coalesced: one in flight per"
            " Workspace). N: at most one save per N seconds, counted from the last save's cut,"
            " the Turns between covered by the next. Either way a Session's disk is saved"
            " when it suspends idle and when it closes. A save is cut at its Turn's end:"
            " the next Turn waits for the cut."
        ),
    )
    pause_at: UsedFraction = Field(
        default=0.9,
        description=(
            "Used share of the disk at which a Session's storage pressure episode pauses it:"
            " queued Turns wait (a running one goes on) until `resume` with the `holdId`"
            " of its `session.storage_pressure` event."
        ),
    )
    stop_at: UsedFraction = Field(
        default=0.98,
        description=(
            "Used share of the disk at which the running Turn is interrupted"
            " (`storage_exhausted`), its process stopped and the Session held."
        ),
    )
    resolve_at: UsedFraction = Field(
        default=0.85,
        description=(
            "Used share of the disk below which the episode resolves and its hold is released."
        ),
    )
    usage_interval_seconds: UsageInterval = Field(
        default=10, description="Seconds between two measurements of the disk's usage."
    )


class EnvVar(WireModel):
    """An environment variable of the runner container."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "!self.name.startsWith('HELMR_')",
                "spec.env[].name must not start with HELMR_: Helmr sets those variables itself",
                field_path=".name",
            )
        )
    )

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$",
        description="Variable name: letters, digits, `_`, `-` and `.`, not starting with a digit.",
    )
    value: str = Field(default="", max_length=32_768, description="Variable value.")


MAX_WARM_POOL = 50
"""The most pooled runner pods one Actor may keep (each holds a pod and a claim)."""


class WarmPoolSpec(WireModel):
    """Runner pods kept Running ahead of the Actor's new Sessions, each with a fresh
    Computer disk mounted and its actor imported: a new Session adopts one instead of
    waiting for a claim to bind and a pod to start."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                f"self.size <= {MAX_WARM_POOL}",
                f"spec.warmPool.size must be at most {MAX_WARM_POOL}",
                field_path=".size",
            )
        )
    )

    size: int = Field(
        default=0,
        ge=0,
        description=(
            "How many pooled runner pods to keep ready (0: none, every Session starts cold)."
            " Each counts against the namespace's quotas like any pod, and holds a claim of"
            " `computer.size`. A Session whose Workspace already has a disk (a reopened"
            " Workspace, a restore, a wake) never takes one."
        ),
    )


class ActorSpec(WireModel):
    """How to run the actor and the limits of its Sessions."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "!has(self.maxTurnDurationSeconds) || !has(self.maxDurationSeconds)"
                " || self.maxTurnDurationSeconds <= self.maxDurationSeconds",
                "spec.maxTurnDurationSeconds must not exceed spec.maxDurationSeconds",
                field_path=".maxTurnDurationSeconds",
            )
        )
    )

    image: str = Field(
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Runner image holding Helmr's runner and the actor's code.",
    )
    entrypoint: str = Field(
        max_length=512,
        pattern=ENTRYPOINT_PATTERN,
        description=(
            "Where the actor is defined, as `module:attr` (for example `reviewer.app:reviewer`):"
            " the runner imports the module and uses the `actor(...)` object at that attribute."
        ),
    )
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = Field(
        default="IfNotPresent",
        description=(
            "When the kubelet pulls the runner image: `IfNotPresent`, `Always` (every runner"
            " pod checks the registry, so a moved tag is picked up) or `Never`."
        ),
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the runner container."
    )
    idle_timeout_seconds: IdleTimeoutSeconds | None = Field(
        default=None,
        description=(
            "How long a runner process waits warm for the next Turn before Helmr suspends it."
            " It does not limit the Session's lifetime: new work starts a new process."
            " Unset: the actor's own `actor(idle_timeout=...)`, else 300."
        ),
    )
    max_turn_duration_seconds: MaxTurnDurationSeconds | None = Field(
        default=None,
        description=(
            "Longest a Turn may run. A Turn that exceeds it ends `interrupted` with reason"
            " `turn_deadline_elapsed`, its process stops and queued Turns continue on a new"
            " process. Unset: no limit."
        ),
    )
    queue_limit: int | None = Field(
        default=None,
        ge=QUEUE.low,
        le=QUEUE.high,
        description=(
            "Most Turns a Session may hold queued; admission beyond it is refused"
            " (HTTP 429 `queue_full`). Unset: the actor's `actor(queue=...)` once a Run of"
            f" the Session reported it, else {DEFAULT_QUEUE_LIMIT}."
        ),
    )
    max_duration_seconds: int | None = Field(
        default=None,
        ge=MAX_DURATION.low,
        le=MAX_DURATION.high,
        description=(
            "Longest one Run (one runner process) may execute. A Run past it ends once its"
            " current Turn settles (a stop, not a failure: `session.process_stopped` reason"
            " `run_duration_elapsed`), and the next Turn starts a new Run. Unset: the actor's"
            " `actor(max_duration=...)` once a Run of the Session reported it, else no limit."
        ),
    )
    ttl_seconds: int | None = Field(
        default=None,
        ge=TTL.low,
        le=TTL.high,
        description=(
            "How long an open Session may stay idle (no queued or running Turn, no hold)"
            " before it closes (`session.closed` how `idle`), releasing its Workspace."
            " Unset: the actor's `actor(ttl=...)` once a Run of the Session reported it,"
            " else it stays open until closed or cancelled."
        ),
    )
    retry: RetrySpec = Field(
        default=RetrySpec(), description="How Helmr retries preparing a runner for a Session."
    )
    computer: ComputerSpec = Field(
        default=ComputerSpec(), description="The Computer disk of this Actor's Workspaces."
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=64,
        description="Environment variables of the runner container, at most one per `name`.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    pod: RunnerPodSettings | None = Field(
        default=None,
        description=(
            "Settings of this Actor's runner pods (pull Secrets, RuntimeClass, priority,"
            " placement, labels, annotations), merged with the chart's `runner.*` defaults."
            " Nothing here can loosen the restricted profile or the runner's identity."
        ),
    )
    network: RunnerNetwork | None = Field(
        default=None,
        description=(
            "What this Actor's runner pods may connect to besides the cluster's DNS and the"
            " control plane's runner API, which are all they reach by default."
        ),
    )
    warm_pool: WarmPoolSpec | None = Field(
        default=None,
        description=(
            "Runner pods kept ready for this Actor's new Sessions (docs/install.md, sizing:"
            " about the start rate times a pod's start time). A pooled pod learns its Session"
            " and the Session's settings when it is adopted; an Actor change replaces the"
            " pooled pods that no longer match it, never adopted ones."
        ),
    )


class WarmPoolStatus(WireModel):
    """The Actor's warm pool as the operator last counted it."""

    size: int = Field(description="Pooled runner pods wanted (`spec.warmPool.size`).")
    ready: int = Field(description="Pooled runner pods Running and waiting to be adopted.")
    adopted: int = Field(description="Runner pods taken from the pool that still run.")


class ActorStatus(Status):
    """What the operator observed about the Actor."""

    conditions: Conditions = None
    observed_generation: ObservedGeneration = None
    warm_pool: WarmPoolStatus | None = Field(
        default=None, description="The warm pool, when `spec.warmPool` asks for one."
    )


class Actor(Resource[ActorSpec, ActorStatus]):
    """A declared actor: the runner image and entrypoint that run it, and its Sessions' limits."""

    KIND = "Actor"
    PLURAL = "actors"
    SHORT_NAMES = ("hact",)
    PRINTER_COLUMNS = (
        column("Image", ".spec.image"),
        column("Entrypoint", ".spec.entrypoint"),
        column("Accepted", condition("Accepted")),
        column("Reason", condition("Accepted", "reason"), priority=1),
        column(
            "Saves",
            condition("SavesAvailable"),
            description="Whether the cluster can save its Sessions' Computer disks.",
        ),
        column("Max Turn", ".spec.maxTurnDurationSeconds", type="integer", priority=1),
        column(
            "Warm",
            ".status.warmPool.ready",
            type="integer",
            description="Pooled runner pods ready to be adopted by a new Session.",
        ),
        AGE,
    )
    # Sessions and runner pods carry the Actor's name as a label value.
    NAME_SCHEMA = LABEL_NAME_SCHEMA
