"""The ``Session`` resource: one durable interaction with an Actor over a Workspace."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from helmr import states
from helmr.resources.actor import IdleTimeoutSeconds, MaxTurnDurationSeconds, RetrySpec
from helmr.resources.base import JsonDict, Resource, Status, WireModel, cel, rules
from helmr.resources.columns import AGE, column, condition
from helmr.resources.fields import (
    LABEL_NAME_SCHEMA,
    Conditions,
    DnsLabel,
    DnsSubdomain,
    Key,
    ObservedGeneration,
)
from helmr.resources.session_env import MAX_ENV, MAX_ENV_FROM, SessionEnvFrom, SessionEnvVar
from helmr.states import HoldReason

# The store's vocabulary, under the names the CRD uses.
SessionPhase = states.SessionStatus
ClosedHow = states.CloseHow


def _unchanged_optional(field: str) -> JsonDict:
    # A rule on the field itself only runs when old and new both have it, so
    # adding or removing the field would slip through; compare from the parent.
    return cel(
        f"has(self.{field}) == has(oldSelf.{field})"
        f" && (!has(self.{field}) || self.{field} == oldSelf.{field})",
        f"spec.{field} is immutable",
        field_path=f".{field}",
    )


class ActorRef(WireModel):
    """A reference to an Actor in the Session's namespace."""

    name: DnsLabel = Field(description="Name of the Actor.")


class ForkFrom(WireModel):
    """The saved state a forked Session starts from: a completed Turn of another
    Session in the namespace, of the same Actor."""

    session: DnsSubdomain = Field(description="Name of the Session forked (left untouched).")
    turn: str = Field(
        min_length=1,
        max_length=128,
        description="Id of its completed Turn whose save the new Workspace is restored from.",
    )


# What a kubectl user asks of the Session (``spec.state``); the store's phase is in the status.
DesiredState = Literal["Open", "Closed", "Cancelled"]


class ResumeRequest(WireModel):
    """Releases one hold, named by its id, so a manifest written for an older hold
    never releases a newer one."""

    hold_id: str = Field(
        min_length=1,
        max_length=128,
        description="The hold to release: `status.hold.holdId` when it was written.",
    )


class SessionSpec(WireModel):
    """Which Actor runs the Session, on which Workspace, the Session's own limits, and the
    controls a kubectl user sets (`state`, `interrupt`, `resume`)."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            _unchanged_optional("key"),
            _unchanged_optional("forkFrom"),
            _unchanged_optional("idempotencyKey"),
            _unchanged_optional("env"),
            _unchanged_optional("envFrom"),
            cel(
                "!has(oldSelf.state) || oldSelf.state != 'Cancelled'"
                " || (has(self.state) && self.state == 'Cancelled')",
                "spec.state: a Cancelled Session stays Cancelled",
                field_path=".state",
            ),
            cel(
                "!has(oldSelf.state) || oldSelf.state == 'Open'"
                " || (has(self.state) && self.state != 'Open')",
                "spec.state: a Closed Session cannot be opened again (it may still be Cancelled)",
                field_path=".state",
            ),
        )
    )

    actor_ref: ActorRef = Field(
        description="The Actor that runs this Session, in the same namespace. Immutable.",
        json_schema_extra=rules(cel("self == oldSelf", "spec.actorRef is immutable")),
    )
    workspace: DnsLabel = Field(
        description=(
            "Name of the Workspace (the Computer disk) this Session holds exclusively while open."
            " It is released once the Session's execution is excluded after close. Immutable."
        ),
        json_schema_extra=rules(cel("self == oldSelf", "spec.workspace is immutable")),
    )
    fork_from: ForkFrom | None = Field(
        default=None,
        description=(
            "Fork: start on a new `workspace` restored from the save of this completed Turn of"
            " another Session (never an older or newer state: refused if that Turn has no save"
            " of its own, waited for while its save is being taken). Immutable."
        ),
    )
    key: Key | None = Field(
        default=None,
        description=(
            "Application-defined key stored with the Session; Helmr does not interpret it."
            " Immutable."
        ),
    )
    idempotency_key: Key | None = Field(
        default=None,
        description=(
            "Makes starting this Session idempotent: a start that repeats the key gets this"
            " Session instead of a new one. Immutable."
        ),
    )
    max_turn_duration_seconds: MaxTurnDurationSeconds | None = Field(
        default=None,
        description="Overrides the Actor's `maxTurnDurationSeconds` for this Session.",
    )
    idle_timeout_seconds: IdleTimeoutSeconds | None = Field(
        default=None,
        description="Overrides the Actor's `idleTimeoutSeconds` for this Session.",
    )
    env: list[SessionEnvVar] | None = Field(
        default=None,
        max_length=MAX_ENV,
        description=(
            "Environment variables of this Session's actor, at most one per `name`: a `value`,"
            " or `valueFrom.secretKeyRef` (a key of a Secret in the Session's namespace). They"
            " win over the Actor's `env` of the same name. A Secret's value never appears in"
            " the Session's status, Events or timeline. Immutable."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    env_from: list[SessionEnvFrom] | None = Field(
        default=None,
        max_length=MAX_ENV_FROM,
        description=(
            "Secrets in the Session's namespace whose every key becomes an environment variable"
            " of this Session's actor (`prefix` before its name); `env` and the Actor's `env`"
            " win over them, as in a Kubernetes container. Immutable."
        ),
    )
    state: DesiredState = Field(
        default="Open",
        description=(
            "What the Session should be. `Open` asks for nothing. `Closed` stops admission and"
            " lets the queued Turns finish, then closes (as the API's close). `Cancelled` cancels"
            " the queued Turns, interrupts the running one and closes (as the API's cancel)."
            " Closed may become Cancelled; neither becomes Open again, and Cancelled stays."
        ),
    )
    interrupt: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description=(
            "An interrupt request. Each new value (a timestamp, say) interrupts the running Turn,"
            " if any, and holds the Session, once; the same value again does nothing. The hold"
            " id appears in `status.hold.holdId` and the `Held` condition."
        ),
    )
    resume: ResumeRequest | None = Field(
        default=None,
        description=(
            "Releases the hold named by `holdId` once its interrupted Turn has stopped. A"
            " `holdId` that is not the Session's current hold releases nothing."
        ),
    )


class Hold(WireModel):
    """A hold stops the Session from running Turns until it is resumed with this `holdId`."""

    hold_id: str = Field(max_length=128, description="Identity of the hold; `resume` must name it.")
    reason: HoldReason = Field(
        description=(
            "Why the Session is held: `interrupt` (an interrupt was accepted),"
            " `process_failures` (three consecutive process failures), `recovery_gap`"
            " (completed work was lost with the Computer and needs acknowledgement) or"
            " `storage_pressure` (the Computer disk is nearly full: see its"
            " `session.storage_pressure` event)."
        )
    )


# The Session controls a kubectl user declares; one the operator refuses is named so.
DeclaredControl = Literal["spec.state", "spec.interrupt", "spec.resume"]


class RefusedControl(WireModel):
    """A declarative control the operator refused: it applied nothing of it."""

    control: DeclaredControl = Field(
        description="The refused control: `spec.state`, `spec.interrupt` or `spec.resume`."
    )
    reason: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Z][A-Za-z0-9]*$",
        description=(
            "Why, in CamelCase: `HoldMismatch` (the resume names no current hold of the"
            " Session), or the Session's state: `SessionClosing`, `SessionClosed`,"
            " `SessionFailed`."
        ),
    )
    message: str = Field(
        max_length=1024, description="What was refused and why, as its Warning Event says."
    )
    at: datetime = Field(description="When the operator refused it.")


class EffectiveLimits(WireModel):
    """The limits the Session runs under, resolved once from its Actor when it opened
    (a Session override wins): an Actor changed later does not change them. What the
    Actor leaves unset is taken from the actor's code (``actor(...)``) when a Run of
    the Session first reports it."""

    queue_limit: int = Field(
        ge=1, description="`queueLimit`: the Actor's, else the code's `queue`, else 100."
    )
    max_turn_duration_seconds: int | None = Field(
        default=None, ge=1, description="`maxTurnDurationSeconds`; absent: no limit."
    )
    max_duration_seconds: int | None = Field(
        default=None,
        ge=1,
        description="`maxDurationSeconds`: the Actor's, else the code's; absent: no limit.",
    )
    ttl_seconds: int | None = Field(
        default=None,
        ge=1,
        description="`ttlSeconds`: the Actor's, else the code's; absent: no idle expiry.",
    )
    idle_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        description=(
            "`idleTimeoutSeconds`: the Session's, else the Actor's, else the code's once"
            " reported; absent: the runner's default (300)."
        ),
    )
    retry: RetrySpec = Field(
        description="`retry`: `maxAttempts` the Actor's, else the code's, else 3."
    )


class SessionStatus(Status):
    """The Session's live control state, mirrored by the operator from the timeline store."""

    session_id: str | None = Field(
        default=None,
        max_length=64,
        description="Helmr's id of the Session (`ses_...`), also the label `helmr.dev/session-id`.",
    )
    phase: SessionPhase | None = Field(
        default=None,
        description=(
            "`open` (admits and runs Turns), `closing` (rejects new input, drains accepted"
            " Turns), `closed` (finished; the Workspace is released) or `failed` (terminated"
            " by repeated infrastructure loss, preparation exhaustion or an application failure)."
        ),
    )
    hold: Hold | None = Field(
        default=None, description="The hold in force, absent when the Session is not held."
    )
    cancel_requested_at: datetime | None = Field(
        default=None, description="When cancellation was requested; it stays once set."
    )
    consecutive_process_failures: int | None = Field(
        default=None,
        ge=0,
        description="Consecutive process failures counted so far; three hold the Session.",
    )
    process_epoch: int | None = Field(
        default=None,
        ge=0,
        description="Epoch of the latest runner process; calls from other epochs are fenced.",
    )
    runner_pod: DnsSubdomain | None = Field(
        default=None, description="Name of the runner pod of the current process, if any."
    )
    active_turn: str | None = Field(
        default=None, max_length=64, description="Id of the running Turn, if any."
    )
    last_sequence: int | None = Field(
        default=None,
        ge=0,
        description="Sequence number of the latest Turn admitted to the Session.",
    )
    queued_turns: int | None = Field(
        default=None, ge=0, description="How many admitted Turns are waiting to run."
    )
    computer_version: str | None = Field(
        default=None,
        max_length=253,
        description="The saved Computer disk version the current process started from.",
    )
    closed_how: ClosedHow | None = Field(
        default=None,
        description="How the Session closed: `close` (drained), `cancel` or `idle`.",
    )
    limits: EffectiveLimits | None = Field(
        default=None,
        description="The limits in force, resolved from the Actor when the Session opened.",
    )
    last_refused: RefusedControl | None = Field(
        default=None,
        description=(
            "The control last refused (each refusal also leaves a Warning Event"
            " `ControlRefused`); it stays after later controls apply."
        ),
    )
    conditions: Conditions = None
    observed_generation: ObservedGeneration = None


class Session(Resource[SessionSpec, SessionStatus]):
    """A durable Session: the stable address of an Actor's Runs and Turns over one Workspace."""

    KIND = "Session"
    PLURAL = "sessions"
    SHORT_NAMES = ("hses",)
    PRINTER_COLUMNS = (
        column("Actor", ".spec.actorRef.name"),
        column("Phase", ".status.phase"),
        column("Active Turn", ".status.activeTurn"),
        column("Queued", ".status.queuedTurns", type="integer"),
        column("Hold", ".status.hold.reason"),
        column("Ready", condition("Ready")),
        column("Reason", condition("Ready", "reason")),
        column("Workspace", ".spec.workspace", priority=1),
        column("Session ID", ".status.sessionId", priority=1),
        AGE,
    )
    # Runner pods carry the Session's name as a label value.
    NAME_SCHEMA = LABEL_NAME_SCHEMA
