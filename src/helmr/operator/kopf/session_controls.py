"""The Session controls a kubectl user declares in the spec, applied through Control.

``spec.state`` and ``spec.resume`` are levels: applied whenever the spec is
seen (created, changed, or on the operator's start), each a no-op once the
store is where they ask. ``spec.interrupt`` is a request: each new value
interrupts once. A control the Session cannot take is refused
(:class:`~helmr.operator.mirror.refusals.Refusal`) when it is asked, that is when its
field is new: a level applied again (after a restart, or beside another field's
change) refuses nothing it did not refuse when it was asked.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from helmr.control import SessionView
from helmr.control.operator_api import OperatorControl
from helmr.errors import HoldMismatch, HoldNotConverged, SessionNotOpen
from helmr.operator.mirror.refusals import Refusal, not_open
from helmr.resources import DeclaredControl, SessionSpec
from helmr.states import ENDED_SESSION_STATUSES

log = logging.getLogger(__name__)


class NotYet(Exception):
    """A control that cannot apply yet (the hold to resume has not converged): try again soon."""


@dataclass
class _Refusals:
    """The refusals of one ``apply_spec``: only of the controls asked (whose fields are new)."""

    control: OperatorControl
    session_id: str
    asked: Collection[DeclaredControl]
    refused: list[Refusal] = field(default_factory=list)

    def refuse(self, what: DeclaredControl, refusal: Refusal) -> None:
        if what in self.asked:
            self.refused.append(refusal)

    async def ended(self, what: DeclaredControl, value: str, undone: str) -> None:
        # Read again: it ended (or began closing) after ``view`` was read.
        if what in self.asked:
            now = await self.control.get_session(self.session_id)
            self.refused.append(not_open(what, value, now, undone))


async def apply_spec(
    control: OperatorControl,
    view: SessionView,
    spec: SessionSpec,
    *,
    asked: Collection[DeclaredControl],
) -> list[Refusal]:
    """Brings the Session (``view``, as the caller just read it) to what ``spec``
    asks; ``asked``: the controls whose fields are new (``spec.interrupt`` applies
    only then). Nothing is read again unless a control is refused: a resumed Session
    whose spec asks nothing costs no transaction here. Returns the refusals."""
    refusals = _Refusals(control, view.id, asked)
    await _apply_state(control, view, spec, refusals)
    if "spec.interrupt" in asked and spec.interrupt is not None:
        await _apply_interrupt(control, view.id, spec.interrupt, refusals)
    if spec.resume is not None:
        await _apply_resume(control, view.id, spec.resume.hold_id, refusals)
    return refusals.refused


async def _apply_state(
    control: OperatorControl, view: SessionView, spec: SessionSpec, refusals: _Refusals
) -> None:
    session_id = view.id
    state = f"spec.state {spec.state}"
    if spec.state == "Cancelled" and view.cancel_requested_at is None:
        if view.status in ENDED_SESSION_STATUSES:
            refusals.refuse("spec.state", not_open("spec.state", state, view, "nothing cancelled"))
        else:
            try:
                await control.cancel(session_id)
                log.info("session %s: cancelled by spec.state", session_id)
            except SessionNotOpen:
                await refusals.ended("spec.state", state, "nothing cancelled")
    elif spec.state == "Closed" and view.status == "failed":
        refusals.refuse("spec.state", not_open("spec.state", state, view, "nothing closed"))
    elif spec.state == "Closed" and view.status == "open":
        try:
            await control.close(session_id)
            log.info("session %s: closed by spec.state", session_id)
        except SessionNotOpen:
            await refusals.ended("spec.state", state, "nothing closed")


async def _apply_interrupt(
    control: OperatorControl, session_id: str, interrupt: str, refusals: _Refusals
) -> None:
    try:
        receipt = await control.interrupt(session_id)
        log.info("session %s: interrupted by spec.interrupt, hold %s", session_id, receipt.hold_id)
    except SessionNotOpen:
        await refusals.ended("spec.interrupt", f"spec.interrupt {interrupt}", "nothing interrupted")


async def _apply_resume(
    control: OperatorControl, session_id: str, hold_id: str, refusals: _Refusals
) -> None:
    try:
        await control.resume(session_id, hold_id)
    except HoldNotConverged as e:
        raise NotYet(str(e)) from e
    except HoldMismatch as e:
        refusals.refuse("spec.resume", _mismatch(hold_id, e))
    except SessionNotOpen:
        await refusals.ended("spec.resume", f"spec.resume.holdId {hold_id}", "nothing resumed")


def _mismatch(hold_id: str, error: HoldMismatch) -> Refusal:
    current = error.details.get("current_hold_id")
    held = f"its hold is {current}" if current else "it is not held"
    message = f"spec.resume.holdId {hold_id} is not the Session's hold ({held}); nothing resumed"
    return Refusal("spec.resume", "HoldMismatch", message)
