"""What the operator refuses of a kubectl user, told on the resource they applied.

A kubectl user reads the resource, its conditions and its Events, not the
operator's log, so every refusal is written there, once:

- a Session control refused (:class:`Refusal`: a resume naming no current
  hold, an interrupt or a cancel of a Session that has ended) leaves one
  Warning Event ``ControlRefused`` on the Session, and ``status.lastRefused``
  says what was last refused; a refusal equal to the one the status shows
  already is not told again (kopf retries a handler, and applies the levels
  again after a restart);
- a Turn applied for a Session that admits no Turns ends ``failed`` (error
  ``session_not_open``, its reason naming the Session's state) with its
  ``Failed`` condition and one Warning Event; an ended Turn is never admitted
  again (helmr.operator.kopf.handlers), so nothing retries it;
- a Session that cannot be opened at all (a fork refused, a history the store
  lost) ends ``failed`` with its ``Failed`` condition and one Warning Event;
- a Turn naming a Session that does not exist waits for it, and one Warning
  Event ``SessionNotFound`` on the Turn says so.

The status is written before the Event: it is what says a refusal was told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from helmr.control import SessionView
from helmr.errors import SessionNotOpen
from helmr.kube.client import Kube
from helmr.operator.mirror.conditions import MESSAGE_MAX, Observation, camel, settle, words
from helmr.operator.mirror.event_text import CLOSED_HOW
from helmr.resources import (
    DeclaredControl,
    RefusedControl,
    Session,
    SessionStatus,
    Turn,
    TurnError,
    TurnStatus,
)
from helmr.states import TERMINAL_TURN_STATUSES

CONTROL_REFUSED = "ControlRefused"
"""The reason of a refused control's Warning Event on the Session."""
SESSION_NOT_FOUND = "SessionNotFound"
"""The reason of the Warning Event on a Turn whose Session does not exist."""


@dataclass(frozen=True)
class Refusal:
    """A Session control the operator refused; ``reason`` is CamelCase."""

    control: DeclaredControl
    reason: str
    message: str


def session_state(view: SessionView) -> tuple[str, str]:
    """The state that keeps a Session from taking controls and Turns: a snake_case
    reason (``session_closed``) and how it reads after "the Session"."""
    if view.status == "failed":
        return "session_failed", f"has failed ({words(view.failure_reason or 'failed')})"
    if view.status == "closed":
        how = CLOSED_HOW.get(view.closed_how or "close", "")
        return "session_closed", f"is closed ({how})"
    if view.cancel_requested_at is not None:
        return "session_closing", "is being cancelled"
    return "session_closing", "is closing (its queued Turns still run)"


def not_open(control: DeclaredControl, asked: str, view: SessionView, undone: str) -> Refusal:
    """``control`` (``asked``: its field and value as the spec has them) refused because
    the Session (``view``) is closing or ended; ``undone``: what it did not do."""
    reason, state = session_state(view)
    return Refusal(control, camel(reason), f"{asked}: the Session {state}; {undone}")


async def tell_refused(kube: Kube, session: Session, refusals: Sequence[Refusal]) -> None:
    """One Warning Event per refusal the Session's status does not show already, and
    ``status.lastRefused`` the last of them."""
    status = session.status
    last = None if status is None else status.last_refused
    told = None if last is None else Refusal(last.control, last.reason, last.message)
    new = [refusal for refusal in refusals if refusal != told]
    if not new:
        return
    namespace = session.metadata.namespace or ""
    name = session.metadata.name or ""
    latest = new[-1]
    refused = RefusedControl(
        control=latest.control,
        reason=latest.reason,
        message=latest.message[:MESSAGE_MAX],
        at=datetime.now(UTC),
    )
    await kube.patch_resource_status(Session, namespace, name, SessionStatus(last_refused=refused))
    for refusal in new:
        await kube.record_event(
            Session,
            namespace,
            name,
            CONTROL_REFUSED,
            refusal.message[:MESSAGE_MAX],
            warning=True,
            uid=session.metadata.uid,
        )


async def refuse_admission(kube: Kube, turn: Turn, view: SessionView) -> None:
    """The Turn applied for the Session ``view`` (which admits no Turns) ends ``failed``."""
    reason, state = session_state(view)
    name = turn.metadata.name or ""
    message = f"Turn {name} was not admitted: the Session {view.name} {state} and admits no Turns"
    await fail_turn(kube, turn, code=SessionNotOpen.code, reason=reason, message=message)


async def refuse_unopened(kube: Kube, turn: Turn, session: Session) -> None:
    """The Turn applied for a Session that failed before it ever opened (a refused
    fork) ends ``failed``, as for any Session that admits no Turns."""
    message = (
        f"Turn {turn.metadata.name} was not admitted: the Session {session.metadata.name}"
        " failed before it opened and admits no Turns"
    )
    await fail_turn(kube, turn, code=SessionNotOpen.code, reason="session_failed", message=message)


async def fail_turn(kube: Kube, turn: Turn, *, code: str, reason: str, message: str) -> None:
    """Writes the Turn ``failed`` (error ``code``, ``reason``) with its ``Failed``
    condition and a Warning Event (reason ``reason`` in CamelCase), unless it already
    ended: an ended Turn keeps its outcome."""
    status = turn.status
    if status is not None and status.phase in TERMINAL_TURN_STATUSES:
        return
    namespace = turn.metadata.namespace or ""
    name = turn.metadata.name or ""
    now = datetime.now(UTC)
    failed = TurnStatus(
        phase="failed",
        ended_at=now,
        error=TurnError(code=code, message=message),
        reason=reason,
        conditions=settle(
            None if status is None else status.conditions,
            [Observation("Failed", "True", camel(reason), message)],
            now,
        ),
    )
    await kube.patch_resource_status(Turn, namespace, name, failed)
    await kube.record_event(
        Turn, namespace, name, camel(reason), message, warning=True, uid=turn.metadata.uid
    )


async def fail_unopened_session(kube: Kube, session: Session, reason: str, message: str) -> bool:
    """Writes a Session the store has no (more) record of ``failed``: its ``Ready``
    False and ``Failed`` True conditions (``reason``, CamelCase) and one Warning
    Event. Returns False, writing nothing, when its status shows that failure
    already (kopf resumes it after a restart)."""
    status = session.status
    previous = None if status is None else status.conditions
    told = any(c.type == "Failed" and c.reason == reason for c in previous or ())
    if status is not None and status.phase == "failed" and told:
        return False
    namespace = session.metadata.namespace or ""
    name = session.metadata.name or ""
    conditions = settle(
        previous,
        [
            Observation("Ready", "False", reason, message),
            Observation("Failed", "True", reason, message),
        ],
        datetime.now(UTC),
        session.metadata.generation,
    )
    failed = SessionStatus(
        phase="failed",
        hold=None,
        runner_pod=None,
        active_turn=None,
        queued_turns=0,
        conditions=conditions,
    )
    await kube.patch_resource_status(Session, namespace, name, failed)
    await kube.record_event(
        Session, namespace, name, reason, message, warning=True, uid=session.metadata.uid
    )
    return True


async def tell_session_not_found(kube: Kube, turn: Turn, message: str) -> None:
    """The one Warning Event on a Turn whose Session does not exist (it waits for it)."""
    await kube.record_event(
        Turn,
        turn.metadata.namespace or "",
        turn.metadata.name or "",
        SESSION_NOT_FOUND,
        message,
        warning=True,
        uid=turn.metadata.uid,
    )
