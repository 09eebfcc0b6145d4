"""A stop accepted for a running Turn (an interrupt or a cancel) that has not converged yet.

Read-only rules on store rows, shared by the transitions (``lifecycle``), the
runner-call fence (``guards``) and the views: the Turn stays ``running`` until
its process lets go of it, and only then is it ``interrupted``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from helmr.store import SessionRow, TurnRow


@dataclass(frozen=True)
class StopRequest:
    """A stop accepted for the running Turn and not converged yet."""

    reason: str
    """The Turn's ``interrupted`` reason once it converges: ``interrupt`` or ``cancel``."""
    details: dict[str, JsonValue]


def stop_request(session: SessionRow, turn: TurnRow) -> StopRequest | None:
    """The stop accepted for the running ``turn`` and not converged yet, if any.

    An interrupt names the Turn in the Session's hold (reason ``interrupt``, with
    its ``holdId``); a cancel sets ``cancel_requested_at`` (reason ``cancel``). The
    first one accepted decides: a hold outlives a later cancel until the Turn ends.
    While a stop is pending the Turn stays ``running`` and every runner call for it
    is refused (``turn_not_active``), so nothing the old handler writes lands after
    its outcome.
    """
    if turn.status != "running" or session.active_turn_id != turn.id:
        return None
    hold = session.hold
    if hold is not None and hold.reason == "interrupt" and hold.turn_id == turn.id:
        return StopRequest("interrupt", {"holdId": hold.id})
    if session.cancel_requested_at is not None:
        return StopRequest("cancel", {})
    return None


def hold_converged(session: SessionRow) -> bool:
    """Whether the process has let go of the Turn the Session's hold interrupted.

    The interrupted Turn stays the active one until then, so only that tells.
    """
    hold = session.hold
    return hold is None or hold.turn_id is None or hold.turn_id != session.active_turn_id
