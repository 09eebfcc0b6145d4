"""One trace per Turn, told in spans once their facts are known.

A Turn's life crosses processes and time (the API admits it, a runner pod runs
it, the snapshot controller saves its disk), so no span is held open: each is
emitted with explicit start and end times when the fact that ends it is
known, and the trace id and span ids are derived from the Turn's id
(``helmr.operator.telemetry.otel``), so spans emitted apart, even by different
processes, form one trace without storing a trace context anywhere.

Spans (the root's children, all named ``turn.<step>``)::

    turn             admission (turn.queued) to its end (the terminal event)
    turn.admission   the admitting request's arrival to the commit (the API's
                     enqueue or send, or a kubectl-created Turn resource's creation)
    turn.queue_wait  admission to running (turn.running)
    turn.dispatch    from when the Turn could run (admitted, the Turn before it
                     ended, no hold) to running: a runner's start, if one had to
                     start, and the hand-over
    turn.handler     running to the runner asking to settle it (complete or fail),
                     or to its end when it was interrupted or cancelled
    turn.settlement  the runner's complete/fail to the outcome's commit (message
                     handlers still running finish first)
    turn.save        a completed Turn's Computer disk save: requested to ready
                     (or given up)

The handler span is the control plane's, from the runner's reports: the runner
stays free of OpenTelemetry (its image has only the standard library and the
base dependencies) and its cold start pays for nothing.

The facts come from the Session timelines the status mirror follows
(:meth:`TurnTraces.observe`, like the timeline metrics), and from the three
facts no event records: an admission's request time and a settlement's
(``helmr.server.traces``) and a save's end (``helmr.operator.disks.workspaces``). Spans are
emitted only for events newer than this process; older events still teach
what they say (a Turn queued before a restart has its queue wait traced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from helmr.events import TURN_ENDINGS, Event, EventKind
from helmr.protocol.api import TurnView
from helmr.store.rows import SaveRow

ROOT = "turn"


Attributes = Mapping[str, str | int | bool]


@dataclass(frozen=True)
class TurnSpan:
    """One span of the Turn ``turn_id``'s trace; ``parent`` None for the root."""

    turn_id: str
    name: str
    start: datetime
    end: datetime
    parent: str | None = ROOT
    attributes: Attributes = field(default_factory=dict)
    error: str | None = None


class SpanSink(Protocol):
    """Where spans go (``helmr.operator.telemetry.otel``: OpenTelemetry's exporters)."""

    def emit(self, span: TurnSpan) -> None: ...

    def shutdown(self) -> None: ...


@dataclass
class _Turn:
    session_id: str
    queued_at: datetime
    running_at: datetime | None = None
    epoch: int | None = None


def _data(event: Event) -> Mapping[str, object]:
    return event.data if isinstance(event.data, dict) else {}


class TurnTraces:
    """Emits each Turn's spans to ``sink`` (implements ``helmr.server.traces.TurnTraceFacts``).

    Remembers live Turns only (until their terminal event) and, per open Session,
    since when its next Turn could start. A settlement may be told before the
    mirror has followed the Turn's first events: it is kept apart until then.
    """

    def __init__(self, sink: SpanSink) -> None:
        self._sink = sink
        self._turns: dict[str, _Turn] = {}
        self._ready_at: dict[str, datetime] = {}
        # Turn id -> (its Session, when its runner asked to settle it).
        self._settling_at: dict[str, tuple[str, datetime]] = {}

    def shutdown(self) -> None:
        """Sends what is buffered (the exporter's batch) and stops."""
        self._sink.shutdown()

    # Facts no timeline event records ----------------------------------------------------

    def admitted(
        self, turn: TurnView, requested_at: datetime, *, asked_at: datetime | None = None
    ) -> None:
        """``turn``, admitted by a request made at ``requested_at``. A Turn committed
        before the call (``asked_at``, else ``requested_at``) was admitted earlier: a
        repeated idempotency key, or kopf resuming a Turn resource it admitted."""
        if turn.created_at < (asked_at or requested_at):
            return
        self._sink.emit(
            TurnSpan(
                turn.id,
                "turn.admission",
                min(requested_at, turn.created_at),
                turn.created_at,
                attributes={"helmr.turn.source": turn.source},
            )
        )

    def settling(self, session_id: str, turn_id: str, requested_at: datetime) -> None:
        self._settling_at.setdefault(turn_id, (session_id, requested_at))

    def save_ended(self, save: SaveRow) -> None:
        """A completed Turn's save is ready, or was given up (failed, lost), or the
        newer save that covered it ended (committed if ``ready_at`` is set)."""
        end = save.ready_at or datetime.now(UTC)
        attributes: dict[str, str | int] = {
            "helmr.namespace": save.namespace,
            "helmr.workspace": save.workspace,
            "helmr.save.version": save.version,
            "helmr.save.status": save.status,
            "helmr.save.attempts": save.attempts,
        }
        error: str | None
        if save.status == "covered":
            attributes["helmr.save.covered_by"] = save.covered_by or 0
            error = None if save.ready_at else f"covered by save {save.covered_by}, given up"
        else:
            error = None if save.status == "ready" else (save.error or save.status)
        self._sink.emit(
            TurnSpan(
                save.turn_id,
                "turn.save",
                save.requested_at,
                max(end, save.requested_at),
                attributes=attributes,
                error=error,
            )
        )

    # The timeline ---------------------------------------------------------------------

    def observe(self, event: Event, *, emit: bool) -> None:
        """Takes in one timeline event, in order; ``emit`` False for events older than
        this process (what they say is remembered, nothing is emitted)."""
        turn_id = event.turn_id
        if event.kind == EventKind.TURN_QUEUED and turn_id is not None:
            self._turns[turn_id] = _Turn(event.session_id, event.created_at)
        elif event.kind == EventKind.TURN_RUNNING and turn_id is not None:
            self._running(turn_id, event, emit)
        elif event.kind in TURN_ENDINGS and turn_id is not None:
            self._ended(turn_id, event, emit)
        elif event.kind == EventKind.SESSION_RESUME:
            # A held Session starts nothing: its next Turn could start from the release.
            self._ready_at[event.session_id] = event.created_at
        elif event.kind == EventKind.SESSION_CLOSED:
            self._ready_at.pop(event.session_id, None)
            for turn_id, (session_id, _) in list(self._settling_at.items()):
                if session_id == event.session_id:
                    del self._settling_at[turn_id]

    def _running(self, turn_id: str, event: Event, emit: bool) -> None:
        turn = self._turns.get(turn_id)
        if turn is None:
            return
        turn.running_at, turn.epoch = event.created_at, event.process_epoch
        if not emit:
            return
        attributes: Attributes = (
            {} if event.process_epoch is None else {"helmr.epoch": event.process_epoch}
        )
        could_start = max(turn.queued_at, self._ready_at.get(turn.session_id, turn.queued_at))
        for name, start in (("turn.queue_wait", turn.queued_at), ("turn.dispatch", could_start)):
            self._sink.emit(TurnSpan(turn_id, name, start, event.created_at, attributes=attributes))

    def _ended(self, turn_id: str, event: Event, emit: bool) -> None:
        turn = self._turns.pop(turn_id, None)
        asked = self._settling_at.pop(turn_id, None)
        self._ready_at[event.session_id] = event.created_at
        if turn is None or not emit:
            return
        end, status = event.created_at, TURN_ENDINGS[event.kind]
        data = _data(event)
        error = _error(data) if status == "failed" else None
        epoch: Attributes = {} if turn.epoch is None else {"helmr.epoch": turn.epoch}
        if turn.running_at is not None:
            settling = asked[1] if asked is not None and status in ("completed", "failed") else None
            handler_end = end if settling is None else max(turn.running_at, min(settling, end))
            self._sink.emit(
                TurnSpan(turn_id, "turn.handler", turn.running_at, handler_end, attributes=epoch)
            )
            if settling is not None:
                self._sink.emit(TurnSpan(turn_id, "turn.settlement", handler_end, end))
        reason = data.get("reason")
        self._sink.emit(
            TurnSpan(
                turn_id,
                ROOT,
                turn.queued_at,
                end,
                parent=None,
                attributes={
                    "helmr.session": turn.session_id,
                    "helmr.turn.status": status,
                    **({"helmr.turn.reason": reason} if isinstance(reason, str) else {}),
                    **epoch,
                },
                error=error,
            )
        )


def _error(data: Mapping[str, object]) -> str:
    error = data.get("error")
    if isinstance(error, dict):
        return f"{error.get('code') or 'failed'}: {error.get('message', '')}".rstrip(": ")
    return "failed"
