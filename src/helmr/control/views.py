"""What :class:`helmr.control.Control` returns.

The public views are the REST API's models (``helmr.protocol.api``, one
definition for the server and the client); the functions here build them
from store rows. ``ProcessStop`` and ``ProcessOutcome`` are the operator's
own: no route returns them.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

from helmr.control.stops import hold_converged
from helmr.protocol.api import (
    HoldView,
    LimitsView,
    MessageView,
    SessionView,
    StopReceipt,
    TurnView,
    workspace_id,
)
from helmr.states import ErrorInfo, SessionStatus
from helmr.store import (
    HoldRow,
    MessageRow,
    ReadTx,
    SessionLimits,
    SessionRow,
    TurnRow,
    sessions,
    turns,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Model = TypeVar("_Model", bound=BaseModel)


def hold_view(session: SessionRow, row: HoldRow) -> HoldView:
    return _from_row(HoldView, row, hold_id=row.id, converged=hold_converged(session))


def stop_receipt(hold: HoldRow) -> StopReceipt:
    """The receipt of the interrupt that placed ``hold``."""
    return _from_row(StopReceipt, hold, hold_id=hold.id, accepted_at=hold.created_at)


def session_view(row: SessionRow, *, queued_turns: int) -> SessionView:
    return _from_row(
        SessionView,
        row,
        workspace_id=workspace_id(row.namespace, row.workspace),
        hold=None if row.hold is None else hold_view(row, row.hold),
        queued_turns=queued_turns,
        closed_how=row.close_how if row.status == "closed" else None,
        max_turn_duration=None if row.limits is None else row.limits.max_turn_duration,
        limits=None if row.limits is None else limits_view(row.limits),
    )


def limits_view(limits: SessionLimits) -> LimitsView:
    # The two limits that always have one are shown as in force.
    return _from_row(
        LimitsView,
        limits,
        queue_limit=limits.queue,
        retry_max_attempts=limits.retry_attempts,
    )


def load_session(rt: ReadTx, session_id: str) -> SessionView:
    """The Session (NotFound if there is none)."""
    session, queued_turns = sessions.require_counted(rt, session_id)
    return session_view(session, queued_turns=queued_turns)


def load_turn(rt: ReadTx, session_id: str, turn_id: str) -> TurnView:
    """The Turn of the Session (NotFound if there is none)."""
    return turn_view(turns.require(rt, session_id, turn_id))


def turn_view(row: TurnRow) -> TurnView:
    return _from_row(
        TurnView,
        row,
        error=None if row.error is None else ErrorInfo.from_json(row.error),
        # A queued Turn's epoch is the process that gave it back (turns.release).
        epoch=None if row.status == "queued" else row.epoch,
        settling=row.settling is not None,
        messages_ready=row.messages_ready_at is not None,
    )


def message_view(row: MessageRow) -> MessageView:
    return _from_row(MessageView, row)


def _from_row(view: type[_Model], row: DataclassInstance, **computed: object) -> _Model:
    """``view`` of the store row ``row``: each field the row's of the same name,
    unless ``computed`` gives it (one the row lacks, or holds in another form)."""
    same = {name: getattr(row, name) for name in _shared_fields(view, type(row))}
    same.update(computed)
    return view.model_validate(same)


@cache
def _shared_fields(view: type[BaseModel], row: type[DataclassInstance]) -> tuple[str, ...]:
    """The fields ``row`` and ``view`` share, worked out once per pair: every Turn
    builds several views, and asking each field of each row cost more than the
    validation (docs/sizing.md, "CPU per Turn, cut by profile")."""
    return tuple(f.name for f in fields(row) if f.name in view.model_fields)


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class ProcessStop(_View):
    """A runner process the operator must stop."""

    session_id: str
    epoch: int
    reason: str
    """``turn_deadline_elapsed``, ``close``, ``idle``, ``cancel`` or ``session_failed``
    (its end is a stop, not a failure), or ``stop_deadline_elapsed`` (it did not let go
    of an interrupted Turn in time: its end is a process failure)."""


ProcessEnd = Literal["stopped", "failed", "lost", "ignored"]


class ProcessOutcome(_View):
    """What a reported process end meant.

    ``ignored``: the epoch was not the Session's live process (a repeat or a
    stale report). ``hold_id`` is set when this failure held the Session.
    """

    session_id: str
    epoch: int
    outcome: ProcessEnd
    hold_id: str | None
    session_status: SessionStatus


class SessionCounts(_View):
    """How many Sessions the store has, by status, and of those held, by the hold's reason."""

    by_status: dict[str, int]
    """Per ``SessionStatus``."""
    held: dict[str, int]
    """Per ``HoldReason``."""


class SessionName(NamedTuple):
    """Where a Session's resource is: set when it opens, never changed. A tuple:
    the API keeps one for each open Session (helmr.server.session_names)."""

    namespace: str
    name: str


def load_session_name(rt: ReadTx, session_id: str) -> SessionName:
    """The Session's namespace and name (NotFound if there is none)."""
    namespace, name = sessions.name(rt, session_id)
    return SessionName(namespace=namespace, name=name)


def session_names_not_ended(rt: ReadTx, limit: int) -> dict[str, SessionName]:
    """Per id, where the newest ``limit`` Sessions open or closing are."""
    return {
        session_id: SessionName(namespace=namespace, name=name)
        for session_id, namespace, name in sessions.names_not_ended(rt, limit)
    }


def session_counts(rt: ReadTx) -> SessionCounts:
    by_status: dict[str, int] = {}
    held: dict[str, int] = {}
    for status, reason, n in sessions.counts(rt):
        by_status[status] = by_status.get(status, 0) + n
        if reason is not None:
            held[reason] = held.get(reason, 0) + n
    return SessionCounts(by_status=by_status, held=held)
