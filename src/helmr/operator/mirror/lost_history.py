"""Sessions whose history the store lost: they fail, and nothing of them is replayed.

A Session resource whose ``status.sessionId`` is set was admitted by a control
plane; when the store no longer has that Session (the timeline lived on an
emptyDir and the pod went, or a volume was replaced), its history is lost.
Opening it again would replay Turns already completed, interrupted or failed,
which Helmr never does (spec/000). Instead the Session ends ``failed`` with
reason ``history_lost`` and every Turn of it not yet ended fails with the same
reason, as do Turns applied for it later.

The store cannot hold a Session it lost, so that outcome lives on the resources
only: the operator writes their status and a Warning Event directly.
"""

from __future__ import annotations

from typing import Any, cast

from helmr.control import SessionView
from helmr.control.operator_api import OperatorControl
from helmr.errors import NotFound
from helmr.kube import threads as kube_threads
from helmr.kube.client import Kube
from helmr.operator.mirror.refusals import fail_turn, fail_unopened_session
from helmr.resources import (
    GROUP,
    TURNS,
    VERSION,
    Session,
    Turn,
)
from helmr.states import FailureReason

REASON = "HistoryLost"
"""The same as a condition and Event reason."""


class HistoryLost(Exception):
    """The resource shows its Session was admitted, and the store no longer has it."""


async def admitted(control: OperatorControl, session: Session) -> SessionView | None:
    """The store's view of the Session the resource's ``status.sessionId`` names (one
    read), or None when the status names none (not admitted yet, or not mirrored
    yet). Raises :class:`HistoryLost` when the store no longer has it."""
    session_id = None if session.status is None else session.status.session_id
    if session_id is None:
        return None
    try:
        return await control.get_session(session_id)
    except NotFound:
        raise HistoryLost(_lost_message(session)) from None


def _lost_message(session: Session) -> str:
    session_id = session.status.session_id if session.status is not None else None
    return (
        f"the control plane's store no longer has session {session_id}: its history was lost"
        " (a timeline without persistence, or a replaced volume), so none of its Turns is"
        " run again; apply a new Session to go on"
    )


async def fail_session(kube: Kube, session: Session) -> None:
    """Writes the Session ``failed`` (reason ``history_lost``) with a Warning Event,
    and fails its Turns not yet ended; once only (a later pass finds it failed)."""
    message = f"the Session failed: {_lost_message(session)}"
    if not await fail_unopened_session(kube, session, REASON, message):
        return
    namespace = session.metadata.namespace or ""
    name = session.metadata.name or ""
    for turn in await _turns_of(kube, namespace, name):
        await refuse_turn(kube, turn, session)


async def refuse_turn(kube: Kube, turn: Turn, session: Session) -> None:
    """Writes the Turn ``failed`` (code and reason ``history_lost``) with a Warning Event,
    unless it already ended: an ended Turn keeps its outcome."""
    message = f"Turn {turn.metadata.name} failed: {_lost_message(session)}"
    await fail_turn(
        kube,
        turn,
        code=FailureReason.HISTORY_LOST,
        reason=FailureReason.HISTORY_LOST,
        message=message,
    )


async def _turns_of(kube: Kube, namespace: str, session_name: str) -> list[Turn]:
    listed = await kube_threads.call(
        kube.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, TURNS
    )
    turns = [Turn.from_manifest(item) for item in cast(dict[str, Any], listed).get("items", [])]
    return [turn for turn in turns if turn.spec.session_ref.name == session_name]
