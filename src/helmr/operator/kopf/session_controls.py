"""The Session controls a kubectl user declares in the spec, applied through Control.

``spec.state`` and ``spec.resume`` are levels: applied whenever the spec is
seen (created, changed, or on the operator's start), each a no-op once the
store is where they ask. ``spec.interrupt`` is a request: each new value
interrupts once (the kopf handler passes ``interrupt`` only when it changed).
"""

from __future__ import annotations

import contextlib
import logging

from helmr.control import SessionView
from helmr.control.operator_api import OperatorControl
from helmr.errors import HoldMismatch, HoldNotConverged, SessionNotOpen
from helmr.resources import SessionSpec
from helmr.states import ENDED_SESSION_STATUSES

log = logging.getLogger(__name__)


class NotYet(Exception):
    """A control that cannot apply yet (the hold to resume has not converged): try again soon."""


class Refused(Exception):
    """A control that names something it cannot apply to; the message says why."""


async def apply_spec(
    control: OperatorControl, view: SessionView, spec: SessionSpec, *, interrupt: bool
) -> None:
    """Brings the Session (``view``, as the caller just read it) to what ``spec``
    asks; ``interrupt``: ``spec.interrupt`` is new. Nothing is read again: a resumed
    Session whose spec asks nothing costs no transaction here."""
    session_id = view.id
    ended = view.status in ENDED_SESSION_STATUSES
    if spec.state == "Cancelled" and view.cancel_requested_at is None and not ended:
        log.info("session %s: cancelled by spec.state", session_id)
        await control.cancel(session_id)
    elif spec.state == "Closed" and view.status == "open":
        log.info("session %s: closed by spec.state", session_id)
        await control.close(session_id)
    if interrupt and spec.interrupt is not None:
        # Interrupting an ended or cancelled Session has nothing left to stop.
        with contextlib.suppress(SessionNotOpen):
            receipt = await control.interrupt(session_id)
            log.info(
                "session %s: interrupted by spec.interrupt, hold %s", session_id, receipt.hold_id
            )
    if spec.resume is not None:
        await _resume(control, session_id, spec.resume.hold_id)


async def _resume(control: OperatorControl, session_id: str, hold_id: str) -> None:
    try:
        await control.resume(session_id, hold_id)
    except HoldNotConverged as e:
        raise NotYet(str(e)) from e
    except HoldMismatch as e:
        current = e.details.get("current_hold_id")
        held = f"its hold is {current}" if current else "it is not held"
        raise Refused(
            f"spec.resume.holdId {hold_id} is not the Session's hold ({held}); nothing resumed"
        ) from e
    except SessionNotOpen:
        return  # an ended Session holds nothing
