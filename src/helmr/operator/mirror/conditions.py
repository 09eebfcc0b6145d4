"""The ``status.conditions`` of Sessions and Turns, as the Kubernetes API conventions shape them.

Each condition is observed from the store's view (:class:`Observation`) and
settled against the conditions written before (:func:`settle`), so that
``lastTransitionTime`` moves only when a condition's status does. What they
mean is in docs/resources.md; ``kubectl wait --for=condition=...`` reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from helmr.control import SessionView, TurnView
from helmr.resources import Condition
from helmr.states import HoldReason, InterruptReason

ConditionStatus = Literal["True", "False", "Unknown"]

# A condition's message is a sentence for `kubectl describe`; a Turn's full error is in its status.
MESSAGE_MAX = 1024

# Each hold reason's condition reason and why it holds, in the `Held` message.
_HOLD_REASONS: dict[HoldReason, tuple[str, str]] = {
    "interrupt": ("Interrupted", "an interrupt was accepted"),
    "process_failures": ("ProcessFailures", "three consecutive process failures"),
    "recovery_gap": (
        "RecoveryGap",
        "completed work was lost with the Computer and needs acknowledgement",
    ),
    "storage_pressure": (
        "StoragePressure",
        "the Computer disk is nearly full (past pauseAt), so queued Turns wait;"
        " resuming lets them run so the agent can free space",
    ),
}
_CLOSE_REASONS = {"close": "Drained", "cancel": "Cancelled", "idle": "IdleClosed"}


def camel(code: str) -> str:
    """A snake_case code as a CamelCase reason: ``TurnDeadlineElapsed``."""
    return "".join(part[:1].upper() + part[1:] for part in code.replace(".", "_").split("_"))


def words(code: str) -> str:
    """A snake_case code in plain words: ``turn deadline elapsed``."""
    return code.replace("_", " ")


# How the common interruption reasons read after "interrupted"; others read as words.
_INTERRUPTED_BY: dict[str, str] = {
    InterruptReason.INTERRUPT: "by an interrupt",
    InterruptReason.CANCEL: "by cancel",
    InterruptReason.TURN_DEADLINE_ELAPSED: "after maxTurnDuration elapsed",
    InterruptReason.COMPUTER_EXECUTION_LOST: "by the loss of its runner",
}


def interrupted(reason: str | None) -> str:
    """``was interrupted by an interrupt``: how a Turn's interruption reads."""
    if reason is None:
        return "was interrupted"
    return f"was interrupted {_INTERRUPTED_BY.get(reason, f'({words(reason)})')}"


@dataclass(frozen=True)
class Observation:
    """One condition as observed now; ``since`` is when it became so, when the store knows."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    since: datetime | None = None


def settle(
    previous: Sequence[Condition] | None,
    observed: Sequence[Observation],
    now: datetime,
    generation: int | None = None,
) -> list[Condition]:
    """The conditions to write: a condition whose status is unchanged keeps its
    ``lastTransitionTime``; a new or changed one takes ``since``, else ``now``."""
    before = {condition.type: condition for condition in previous or ()}
    settled = []
    for seen in observed:
        old = before.get(seen.type)
        if old is None or old.status != seen.status:
            since = seen.since or now
        else:
            since = old.last_transition_time
        fields: dict[str, object] = {
            "type": seen.type,
            "status": seen.status,
            "reason": seen.reason,
            "message": seen.message
            if len(seen.message) <= MESSAGE_MAX
            else seen.message[: MESSAGE_MAX - 1] + "…",
            "last_transition_time": since,
        }
        # Left unset (so not sent) when unknown, rather than sent as null.
        if generation is not None:
            fields["observed_generation"] = generation
        settled.append(Condition.model_validate(fields))
    return settled


def turn_observations(view: TurnView, name: str) -> list[Observation]:
    """``Complete`` or ``Failed``, once the Turn is terminal, as a Job's conditions:
    nothing while it is queued or running."""
    turn = f"Turn {name}"
    if view.status == "completed":
        what = "with a result" if view.has_result else "without a result"
        return [
            Observation("Complete", "True", "Completed", f"{turn} completed {what}", view.ended_at)
        ]
    if view.status == "failed":
        error = view.error
        reason = "Failed" if error is None else camel(error.code)
        detail = "" if error is None else f": {error.message}"
        return [Observation("Failed", "True", reason, f"{turn} failed{detail}", view.ended_at)]
    if view.status == "interrupted":
        cause = view.reason or "interrupt"
        message = f"{turn} {interrupted(cause)}"
        return [Observation("Failed", "True", camel(cause), message, view.ended_at)]
    if view.status == "cancelled":
        cause = f": {words(view.reason)}" if view.reason else ""
        message = f"{turn} was cancelled{cause}"
        return [Observation("Failed", "True", "Cancelled", message, view.ended_at)]
    return []


def session_observations(view: SessionView, runner_pod: str | None) -> list[Observation]:
    """``Ready`` and ``Held`` always; ``Closed`` once closing or closed; ``Failed`` once failed."""
    observed = [_ready(view, runner_pod), _held(view)]
    if view.status in ("closing", "closed"):
        observed.append(_closed(view))
    if view.status == "failed":
        reason = view.failure_reason or "failed"
        # A reason may carry its detail ("preparation_exhausted: ErrImagePull: ..."):
        # the condition's reason is the code alone, the message says it all.
        code = reason.partition(":")[0]
        message = f"the Session failed: {words(reason)}"
        observed.append(Observation("Failed", "True", camel(code), message, view.closed_at))
    return observed


def _ready(view: SessionView, runner_pod: str | None) -> Observation:
    if view.status != "open":
        return Observation("Ready", "False", camel(view.status), f"the Session is {view.status}")
    if view.hold is not None:
        return Observation("Ready", "False", "Held", f"held by hold {view.hold.hold_id}")
    if runner_pod is not None:
        return Observation("Ready", "True", "RunnerUp", f"runner pod {runner_pod} is up")
    if view.active_turn_id is None and not view.queued_turns:
        message = "idle: no runner is up; the next Turn starts one"
        return Observation("Ready", "True", "Idle", message)
    return Observation("Ready", "False", "RunnerStarting", "a runner is starting for queued Turns")


def _held(view: SessionView) -> Observation:
    hold = view.hold
    if hold is None:
        return Observation("Held", "False", "NotHeld", "no hold is in force")
    reason, why = _HOLD_REASONS[hold.reason]
    stopping = "" if hold.converged else "; the interrupted Turn is still stopping"
    message = (
        f"hold {hold.hold_id}: {why}{stopping}. Resume with spec.resume.holdId: {hold.hold_id}"
    )
    return Observation("Held", "True", reason, message, hold.created_at)


def _closed(view: SessionView) -> Observation:
    how = view.closed_how
    if view.status == "closing":
        if view.cancel_requested_at is not None:
            message = "cancel requested: the running Turn is stopping"
        else:
            message = f"close requested: {view.queued_turns} queued Turns still run"
        return Observation("Closed", "False", "Closing", message)
    reason = _CLOSE_REASONS.get(how or "close", "Closed")
    message = {
        "Drained": "closed after its queued Turns finished",
        "Cancelled": "closed by cancel",
        "IdleClosed": "closed while idle",
    }.get(reason, "closed")
    return Observation("Closed", "True", reason, f"the Session {message}", view.closed_at)
