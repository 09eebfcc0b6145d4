"""The public REST API's views (``/v1``): what the server returns and the client parses.

One definition for both ends: ``helmr.control`` builds these models from
store rows, ``helmr.server`` serializes them as they are (snake case, the
wire format of ``docs/api.md``) and ``helmr.client`` parses them. Like the
runner replies they ignore fields they do not know, so a client keeps working
against a newer server. The requests are ``helmr.protocol.api_requests``',
the paths ``helmr.protocol.api_routes``'; events and pages are
``helmr.events``' models.

The status vocabularies are ``helmr.states``', shared with the store and
the custom resources.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from helmr.states import (
    TERMINAL_TURN_STATUSES,
    CloseHow,
    ErrorInfo,
    HoldReason,
    HoldScope,
    MessageStatus,
    SessionStatus,
    TurnStatus,
)


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class HoldView(_View):
    hold_id: str
    reason: HoldReason
    scope: HoldScope
    """What was interrupted: the ``session``, or one ``turn`` (an exact-Turn interrupt).
    Either way the Session stays held until ``resume(hold_id)``."""
    turn_id: str | None
    created_at: datetime
    converged: bool
    """False while the interrupted Turn is still stopping (it shows ``running``): its
    process has not let go of it yet, and ``resume`` is refused (``hold_not_converged``)."""


class LimitsView(_View):
    """A Session's limits, resolved once from its Actor (or its own overrides); what
    the Actor leaves unset, from the actor's code once a Run reported it
    (``actor(queue=, max_duration=, ttl=, retry=, idle_timeout=)``)."""

    queue_limit: int
    """The most Turns it may hold queued; admission beyond is refused (``queue_full``)."""
    max_turn_duration: timedelta | None
    max_run_duration: timedelta | None
    """How long one Run (runner process) may last; it then ends after its Turn settles."""
    idle_ttl: timedelta | None
    """How long it may stay open with no work before it closes (``closed_how: idle``)."""
    idle_timeout_seconds: int | None
    """The runner's warm wait; None: none set or reported yet (the runner uses the
    actor's own ``actor(idle_timeout=)``, else 300)."""
    retry_max_attempts: int
    """Failed runner preparations in a row that fail it (``preparation_exhausted``)."""
    retry_backoff: timedelta


class SessionView(_View):
    """A Session's state; poll it for ``status == "closed"`` after cancel or close."""

    id: str
    namespace: str
    name: str
    actor: str
    workspace: str
    workspace_id: str
    """The Workspace (Computer disk) this Session holds, as ``<namespace>/<name>``:
    ``client.workspaces.ref(workspace_id)``. Poll for ``status == "closed"`` before
    deleting it."""
    key: str | None
    status: SessionStatus
    hold: HoldView | None
    consecutive_failures: int
    process_epoch: int
    process_live: bool
    active_turn_id: str | None
    queued_turns: int
    cancel_requested_at: datetime | None
    closed_how: CloseHow | None
    """Set once ``status`` is ``closed``."""
    closed_at: datetime | None
    failure_reason: str | None
    """Why a ``failed`` Session was terminated (e.g. ``execution_lost``)."""
    max_turn_duration: timedelta | None
    created_at: datetime
    retained_after: int
    limits: LimitsView | None = None
    """None until the control plane has read the Session's Actor (moments after it opens)."""


class TurnView(_View):
    """A Turn's identity, status and (until retention expires them) payloads.

    ``has_result`` distinguishes "completed without a result" (False) from a
    JSON null result (True, ``result`` None). After the retention period
    ``payload_expired`` is True and ``input``, ``result`` and ``response`` are
    None while identity, status, timestamps and flags remain.
    """

    id: str
    session_id: str
    sequence: int
    status: TurnStatus
    input: JsonValue
    has_result: bool
    result: JsonValue
    has_response: bool
    response: JsonValue
    error: ErrorInfo | None
    """What the runner reported when the Turn failed."""
    reason: str | None
    """Why a Turn ended ``interrupted`` or ``cancelled`` (e.g. ``interrupt``,
    ``turn_deadline_elapsed``, ``process_failed``, ``computer_execution_lost``)."""
    source: str
    idempotency_key: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    epoch: int | None
    """The process epoch the Turn ran on."""
    deadline_at: datetime | None
    settling: bool
    messages_ready: bool
    payload_expired: bool

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TURN_STATUSES


class TurnWaitView(TurnView):
    """``wait``'s reply: the Turn once terminal, or as it is when the wait timed out."""

    timeout: bool
    """True when the wait ended by its timeout; the turn itself goes on."""


class MessageView(_View):
    """A message receipt: accepted for that exact Turn, not proof of handling."""

    id: str
    session_id: str
    turn_id: str
    data: JsonValue
    status: MessageStatus
    reason: str | None
    created_at: datetime
    payload_expired: bool


class SendResult(_View):
    """``kind="messaged"``: ``message`` went to the active ``turn``; ``"enqueued"``:
    the Session was idle and ``turn`` is a new queued Turn carrying the data."""

    kind: Literal["enqueued", "messaged"]
    turn: TurnView
    message: MessageView | None


class StopReceipt(_View):
    """An accepted interrupt; the process may still be converging (the Turn ends
    ``interrupted`` once it has let go). Resume the Session with ``hold_id``."""

    session_id: str
    hold_id: str
    scope: HoldScope
    turn_id: str | None
    """The Turn that was interrupted, if one was running."""
    accepted_at: datetime


class RetentionBoundary(_View):
    """The data of the events stream's ``retention`` event: the stream's cursor
    (``after``) was below the retention boundary, so the records after it up to
    ``retained_after`` are gone; the stream goes on after the boundary."""

    after: int
    retained_after: int


class RunView(_View):
    """The session's current execution (one runner process)."""

    process_epoch: int


class StartResult(_View):
    """``start``'s reply: the Session, and its live runner process if there is one."""

    session: SessionView
    run: RunView | None


class ForkView(_View):
    """Where a forked Workspace's disk started: the save of a Turn of another Session."""

    session_id: str
    workspace: str
    save: str
    """The VolumeSnapshot its first disk was restored from."""
    turn_id: str


class WorkspaceView(_View):
    """A Workspace's Computer disk: the claim the next runner mounts, its committed
    version (the last ready save) and who holds it."""

    id: str
    """``<namespace>/<name>``, the Session's ``workspace_id``."""
    namespace: str
    name: str
    claim_name: str
    """The PersistentVolumeClaim the next runner mounts."""
    computer_version: str | None
    """The last committed save (its VolumeSnapshot's name); None before the first."""
    restored_from: str | None
    """The save the current disk was restored from after an execution loss."""
    pending_saves: int
    held_by: str | None
    """The id of the Session that holds the Workspace (open, or its execution not yet
    excluded); a held Workspace cannot be deleted."""
    forked_from: ForkView | None = None
    """The save it was forked from (its lineage), if it is a fork."""


def workspace_id(namespace: str, name: str) -> str:
    """A Workspace's id: Workspaces are named per namespace."""
    return f"{namespace}/{name}"


def parse_workspace_id(value: str) -> tuple[str, str]:
    """``(namespace, name)`` of a :func:`workspace_id`; ValueError if it is not one."""
    namespace, slash, name = value.partition("/")
    if not (slash and namespace and name) or "/" in name:
        raise ValueError(f"a workspace id is <namespace>/<name>, not {value!r}")
    return namespace, name
