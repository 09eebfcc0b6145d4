"""The ``Turn`` resource: one input admitted to a Session."""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field

from helmr import states
from helmr.resources.base import Resource, Status, WireModel, cel, rules
from helmr.resources.columns import AGE, column, condition
from helmr.resources.fields import Conditions, DnsLabel, Json, Key
from helmr.states import ERROR_CODE_MAX, ERROR_MESSAGE_MAX

# The store's vocabulary, under the names the CRD uses.
TurnPhase = states.TurnStatus


class SessionRef(WireModel):
    """A reference to a Session in the Turn's namespace."""

    name: DnsLabel = Field(description="Name of the Session.")


class TurnSpec(WireModel):
    """The admitted input. The whole spec is fixed when the Turn is created."""

    # One rule on the whole spec, because CEL cannot see inside `input` (it has
    # no schema), yet comparing the spec objects compares `input` too.
    model_config = ConfigDict(
        json_schema_extra=rules(
            cel(
                "self == oldSelf",
                "spec is immutable: sessionRef, input, idempotencyKey and source are fixed"
                " when the Turn is created",
            )
        )
    )

    session_ref: SessionRef = Field(
        description="The Session, in the same namespace, this Turn is for."
    )
    input: Json = Field(description="The Turn's input: any JSON value, defined by the application.")
    idempotency_key: Key | None = Field(
        default=None,
        description=(
            "Makes admission idempotent: a Turn that repeats the key in its Session is not"
            " admitted twice."
        ),
    )
    source: str | None = Field(
        default=None,
        max_length=253,
        description=(
            "Where the Turn came from (for example `api`, `cli` or `kubectl`), as the actor"
            " sees it."
        ),
    )


class TurnError(WireModel):
    """Why a Turn failed."""

    # The limits ErrorInfo cuts a recorded failure to.
    code: str = Field(max_length=ERROR_CODE_MAX, description="Stable machine-readable error code.")
    message: str = Field(max_length=ERROR_MESSAGE_MAX, description="Human-readable explanation.")


class TurnStatus(Status):
    """The Turn's progress and outcome, mirrored by the operator from the timeline store."""

    turn_id: str | None = Field(
        default=None, max_length=64, description="Helmr's id of the Turn (`turn_...`)."
    )
    phase: TurnPhase | None = Field(
        default=None,
        description=(
            "`queued` (admitted, waiting to run), `running` (the turn handler is processing),"
            " or a terminal phase: `completed` (result and optional response committed),"
            " `failed` (the handler threw, returned an invalid result or broke the Turn"
            " contract), `interrupted` (an interrupt, `maxTurnDuration`, or process or host"
            " loss stopped it) or `cancelled` (cancelling the Session cancelled it)."
        ),
    )
    sequence: int | None = Field(
        default=None, ge=1, description="Position of the Turn in its Session (1, 2, ...)."
    )
    created_at: datetime | None = Field(default=None, description="When the Turn was admitted.")
    started_at: datetime | None = Field(default=None, description="When the Turn started running.")
    ended_at: datetime | None = Field(
        default=None, description="When the Turn reached a terminal phase."
    )
    result: Json = Field(
        default=None,
        description="The handler's JSON result, when `hasResult` is true (it may be JSON null).",
    )
    has_result: bool | None = Field(
        default=None,
        description=(
            "Whether the Turn completed with a result: completing without one differs from"
            " completing with `null`."
        ),
    )
    response: Json = Field(
        default=None, description="The optional human-facing response of a completed Turn."
    )
    error: TurnError | None = Field(default=None, description="Why the Turn failed.")
    reason: str | None = Field(
        default=None,
        max_length=128,
        description=(
            "Machine-readable cause of an interruption, for example `turn_deadline_elapsed`."
        ),
    )
    process_epoch: int | None = Field(
        default=None, ge=0, description="Epoch of the runner process the Turn ran on."
    )
    conditions: Conditions = None


class Turn(Resource[TurnSpec, TurnStatus]):
    """One input admitted to a Session; Turns of a Session run one at a time, in sequence."""

    KIND = "Turn"
    PLURAL = "turns"
    SHORT_NAMES = ("hturn",)
    PRINTER_COLUMNS = (
        column("Session", ".spec.sessionRef.name"),
        column("Sequence", ".status.sequence", type="integer"),
        column("Phase", ".status.phase"),
        # Why a Turn did not complete, as Job's Failed condition says it.
        column("Reason", condition("Failed", "reason")),
        column("Turn ID", ".status.turnId", priority=1),
        AGE,
    )
