"""Turn controls: admission, dispatch to the runner, output, response, settlement.

Each function is one write transaction (:func:`look` a read one). Runner-side functions first check
the caller's process epoch (:func:`helmr.control.guards.runner`), so a fenced
process can never commit output or outcomes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from enum import Enum
from typing import Literal

from pydantic import JsonValue

from helmr.control import guards
from helmr.control.lifecycle import (
    active_turn,
    converge_stop,
    finish_closing,
    reject_waiting_messages,
    settle_if_drained,
)
from helmr.control.record import record
from helmr.control.stops import stop_request
from helmr.control.views import load_session, session_view, turn_view
from helmr.events import Event, EventKind
from helmr.protocol.api import SessionView, TurnView
from helmr.states import NO_RESULT, ErrorInfo, NoResult, Outcome, StopReason, TurnSource
from helmr.store import ReadTx, SessionRow, TurnRow, Tx, messages, sessions, timeline, turns

Drained = Literal["drained"]
"""``take_next``'s answer when this process gets no more Turns: the closing
Session has drained, or the process was asked to stop."""


def enqueue(
    tx: Tx,
    session_id: str,
    input: JsonValue,
    *,
    idempotency_key: str | None = None,
    source: str = TurnSource.API,
) -> TurnView:
    """Admits a FIFO Turn to an open Session (held or not), else SessionNotOpen.

    A known idempotency key returns the Turn it admitted, whatever the
    Session's state is now.
    """
    return _enqueue(tx, session_id, input, idempotency_key, source)[1]


def _enqueue(
    tx: Tx, session_id: str, input: JsonValue, idempotency_key: str | None, source: str
) -> tuple[SessionView | None, TurnView]:
    """:func:`enqueue`, answering the Session as the admission left it too (None
    when a known idempotency key answered: the Session was not read)."""
    if idempotency_key is not None:
        existing = turns.by_idempotency_key(tx, session_id, idempotency_key)
        if existing is not None:
            return None, turn_view(existing)
    # The Session and its queue read in one statement, for the guard and the answer:
    # admitting changes none of a Session's view but its queue, one Turn longer.
    session, queued = sessions.require_counted(tx, session_id, lock=True)
    guards.admitting(tx, session, queued)
    turn = admit(tx, session_id, input, idempotency_key=idempotency_key, source=source)
    return session_view(session, queued_turns=queued + 1), turn_view(turn)


def enqueue_answering_session(
    tx: Tx,
    session_id: str,
    input: JsonValue,
    *,
    idempotency_key: str | None = None,
    source: str = TurnSource.API,
) -> tuple[SessionView, TurnView]:
    """:func:`enqueue`, answering the Session as the admission left it too: one
    transaction where the API's enqueue read the Session apart before (for the
    Turn's Kubernetes object), a thread hop and a read each."""
    session, turn = _enqueue(tx, session_id, input, idempotency_key, source)
    return session or load_session(tx, session_id), turn


def admit(
    tx: Tx, session_id: str, input: JsonValue, *, idempotency_key: str | None, source: str
) -> TurnRow:
    turn = turns.insert(tx, session_id, input=input, idempotency_key=idempotency_key, source=source)
    record(
        tx,
        session_id,
        EventKind.TURN_QUEUED,
        {"sequence": turn.sequence, "source": source},
        subject=turn.id,
        turn_id=turn.id,
    )
    return turn


class Step(Enum):
    """What :func:`take_next` does for a Session as it is now (:func:`next_step`)."""

    CONVERGE = "converge"
    """A stop is pending (an accepted stop of the active Turn, or its grace
    deadline): letting go of it is written first, then the Session is looked at again."""
    DRAINED = "drained"
    IDLE = "idle"
    ANSWER = "answer"
    """The active unsettled Turn, answered again."""
    END_RUN = "end_run"
    QUEUE = "queue"
    """Look at the FIFO head (:func:`queue_step`)."""
    START = "start"
    FINISH_CLOSING = "finish_closing"


class Unanswered(Enum):
    """:func:`look`'s answer when only :func:`take_next`, writing, can answer."""

    TAKE_NEXT = "take_next"


def next_step(session: SessionRow, current: TurnRow | None, now: datetime) -> Step:
    """The step for the Session and its active Turn (``current``) at ``now``; the one
    place :func:`take_next` and :func:`look` decide in.

    The runner asks for work, so it has let go of a Turn whose stop was accepted:
    that converges first. The active unsettled Turn is answered again (a receive
    whose reply was lost must not lose the Turn, and asking again never settles
    it). A Run past its ``maxDurationSeconds`` ends (a stop; the next Turn
    starts a new Run). A held Session waits; otherwise the queue decides.
    """
    if session.stop_deadline_at is not None or (
        current is not None and stop_request(session, current) is not None
    ):
        return Step.CONVERGE
    if session.stop_reason is not None:
        return Step.DRAINED
    if current is not None:
        return Step.IDLE if current.settling is not None else Step.ANSWER
    if session.run_deadline_at is not None and session.run_deadline_at <= now:
        return Step.END_RUN
    if session.hold is not None:
        return Step.IDLE
    return Step.QUEUE


def queue_step(session: SessionRow, head: TurnRow | None) -> Step:
    """:data:`Step.QUEUE` resolved by the FIFO head: a closing Session without
    one has drained. The head waits while the save of the Turn before it is
    being cut (``awaiting_cut``, :mod:`helmr.control.disks`): it must not write
    to the disk before the state that save is of has been cut."""
    if head is not None:
        return Step.IDLE if session.awaiting_cut is not None else Step.START
    return Step.FINISH_CLOSING if session.status == "closing" else Step.IDLE


def _plan(rt: ReadTx, session: SessionRow) -> tuple[Step, TurnRow | None]:
    """The step for the Session as ``rt`` reads it, and the Turn it is about
    (the active Turn, or the FIFO head to start)."""
    current = active_turn(rt, session)
    step = next_step(session, current, rt.now)
    if step is not Step.QUEUE:
        return step, current
    head = turns.next_queued(rt, session.id)
    return queue_step(session, head), head


def _answer(step: Step, turn: TurnRow | None) -> TurnView | Drained | Unanswered | None:
    if step is Step.DRAINED:
        return "drained"
    if step is Step.ANSWER and turn is not None:
        return turn_view(turn)
    if step is Step.IDLE:
        return None
    return Unanswered.TAKE_NEXT


def look(rt: ReadTx, session_id: str, epoch: int) -> TurnView | Drained | Unanswered | None:
    """:func:`take_next`'s answer from a read transaction, where it would write
    nothing (the same guard errors); :data:`Unanswered.TAKE_NEXT` otherwise.

    Most receives find nothing to do; answered here they queue behind no writer
    (SQLite's single one) and lock no Session row (PostgreSQL), which matters
    when every runner reconnects at once after a restart.
    """
    session = guards.runner(rt, session_id, epoch)
    return _answer(*_plan(rt, session))


def fence_starts(tx: Tx, session_id: str, epoch: int) -> TurnView | Drained | None:
    """The Turn already started for this process, ``"drained"`` once it gets no more,
    else None; and no Turn is started for it from then on (``receive``'s ``start:
    false``, an ending process's last look: a Turn it would start could only go back).
    The fence is written with the Session's row locked, so a start for this process
    still under way (a wait woken before the look, its transaction slow to run) either
    committed first, and is answered here to be given back, or finds the fence and
    starts nothing: none is left running for a process gone."""
    session = guards.runner(tx, session_id, epoch)
    if session.starts_fenced_epoch != epoch:
        sessions.fence_starts(tx, session_id, epoch)
    answer = _answer(*_plan(tx, session))
    return None if answer is Unanswered.TAKE_NEXT else answer


def take_next(
    tx: Tx,
    session_id: str,
    epoch: int,
    *,
    metadata: dict[str, JsonValue] | None = None,
    tags: list[str] | None = None,
    woken: bool = False,
) -> TurnView | Drained | None:
    """The Turn this process is to run now, ``"drained"``, or None to wait
    (see :func:`next_step`). The FIFO head starts running here: its deadline is
    stored now, from ``maxTurnDuration``, so it survives restarts. The receive's
    ``metadata`` and ``tags``, if given, are recorded on its ``turn.running``.

    ``woken``: asked again by a waiting request after a commit (not its first
    attempt). Such a request never starts a Turn this process gave back
    (:func:`release`): the runner releases only once it has let go of its
    requests in flight (``Session.give_back`` cuts its held reply short first),
    so a wait still running then is one it left, whose start may run after
    the release (woken before it, its transaction slow to run) and would start
    the Turn again for no one. A request sent after the release starts it (a
    wait of its own for something else first, such as a hold, leaves that to
    the runner's next request)."""
    session = guards.runner(tx, session_id, epoch)
    return _take_next(tx, session, epoch, _labels(metadata, tags), woken=woken)


def _take_next(
    tx: Tx, session: SessionRow, epoch: int, labels: dict[str, JsonValue], *, woken: bool = False
) -> TurnView | Drained | None:
    """:func:`take_next` for the Session as this transaction has it (guarded)."""
    session_id = session.id
    step, turn = _plan(tx, session)
    while step is Step.CONVERGE:  # once: converging leaves no stop pending
        converge_stop(tx, session)
        session = sessions.require(tx, session_id)  # as converging left it
        step, turn = _plan(tx, session)
    answer = _answer(step, turn)
    if answer is not Unanswered.TAKE_NEXT:
        return answer
    if step is Step.END_RUN:
        sessions.ask_stop(tx, session_id, StopReason.RUN_DURATION_ELAPSED)
        return "drained"
    if step is Step.START and turn is not None:
        if woken and turn.epoch == epoch:
            return None  # given back by this process (a queued Turn's epoch is its releaser's)
        if session.starts_fenced_epoch == epoch:
            return None  # this process asked for no more (fence_starts)
        return _start(tx, session, turn, epoch, labels)
    finish_closing(tx, session_id)  # Step.FINISH_CLOSING
    return "drained"


def _labels(metadata: dict[str, JsonValue] | None, tags: list[str] | None) -> dict[str, JsonValue]:
    """What a receive gave to record on the Turn it starts (nothing it left out)."""
    labels: dict[str, JsonValue] = {}
    if metadata is not None:
        labels["metadata"] = metadata
    if tags is not None:
        labels["tags"] = list[JsonValue](tags)
    return labels


def _start(
    tx: Tx, session: SessionRow, head: TurnRow, epoch: int, labels: dict[str, JsonValue]
) -> TurnView:
    session_id = session.id
    limit = None if session.limits is None else session.limits.max_turn_duration
    deadline = None if limit is None else tx.now + limit
    turn = turns.started(tx, head, epoch, deadline)
    record(
        tx,
        session_id,
        EventKind.TURN_RUNNING,
        {"processEpoch": epoch, **labels},
        # A Turn given back (release) by process ``head.epoch`` starts again.
        subject=turn.id if head.epoch is None else f"{turn.id}:after:{head.epoch}",
        turn_id=turn.id,
        epoch=epoch,
        session_change=sessions.turn_starting(turn.id),  # with its sequence: one update
    )
    return turn_view(turn)


def _then_take_next(
    tx: Tx,
    settled: tuple[TurnRow, SessionRow | None],
    epoch: int,
    labels: tuple[dict[str, JsonValue] | None, list[str] | None],
) -> TurnView | Drained | None:
    """:func:`take_next` after a settlement in the same transaction, once the Turn has
    settled (not while a started message handler keeps it settling: None, the
    runner then asks with a ``receive``), for the Session as the settlement left it."""
    turn, session = settled
    if turn.status == "running":
        return None
    session = session or guards.runner(tx, turn.session_id, epoch)
    return _take_next(tx, session, epoch, _labels(*labels))


def complete_and_take_next(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str,
    result: JsonValue | NoResult = NO_RESULT,
    *,
    metadata: dict[str, JsonValue] | None = None,
    tags: list[str] | None = None,
) -> TurnView | Drained | None:
    """:func:`complete`, then the runner's next receive (without waiting), as one
    transaction: a busy runner's whole turn boundary."""
    settled = _settle(tx, session_id, epoch, turn_id, "completed", _completing(tx, result))
    return _then_take_next(tx, settled, epoch, (metadata, tags))


def fail_and_take_next(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str,
    error: ErrorInfo,
    *,
    metadata: dict[str, JsonValue] | None = None,
    tags: list[str] | None = None,
) -> TurnView | Drained | None:
    """:func:`fail`, then the runner's next receive, as :func:`complete_and_take_next`."""
    settled = _settle(tx, session_id, epoch, turn_id, "failed", _failing(tx, error))
    return _then_take_next(tx, settled, epoch, (metadata, tags))


def release(tx: Tx, session_id: str, epoch: int, turn_id: str) -> None:
    """Puts a Turn this process was given with a settlement (:func:`complete_and_take_next`)
    and never handed to its actor back at the head of the queue, recording
    ``turn.queued`` again (``released``); once back, asking again changes nothing.
    A stop accepted meanwhile wins (TurnNotActive): the Turn converges as any other."""
    session = guards.runner(tx, session_id, epoch)
    turn = turns.require(tx, session_id, turn_id)
    if turn.status == "queued":
        return
    turn = guards.unsettled(guards.running(session, turn))
    turns.released(tx, turn)
    record(
        tx,
        session_id,
        EventKind.TURN_QUEUED,
        {"sequence": turn.sequence, "source": turn.source, "released": True, "processEpoch": epoch},
        # A process gives a Turn back once at most (the runner releases only a Turn
        # it never handed out, and then hands it out or ends).
        subject=f"{turn.id}:released:{epoch}",
        turn_id=turn.id,
        epoch=epoch,
        # Active no more, set in the statement that takes the event's sequence.
        session_change=sessions.turn_ending(turn.id, completed=False),
    )


def output(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str | None,
    value: JsonValue,
    idempotency_key: str | None = None,
) -> Event:
    """Appends ``turn.output`` for the active Turn, or Session-level output (no turn).

    Output is accepted while the Turn settles: callbacks that started before
    settlement may still write, and settlement waits for them. The same
    ``idempotency_key`` returns the first event.
    """
    session = guards.runner(tx, session_id, epoch)
    if turn_id is not None:
        guards.active(tx, session, turn_id)
    return timeline.append_output(
        tx, session_id, turn_id, value, idempotency_key=idempotency_key, process_epoch=epoch
    )


def output_batch(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str | None,
    items: Sequence[tuple[JsonValue, str]],
) -> None:
    """:func:`output` of each ``(value, idempotency_key)`` in order, in one transaction."""
    session = guards.runner(tx, session_id, epoch)
    if turn_id is not None:
        guards.active(tx, session, turn_id)
    for value, key in items:
        timeline.append_output(
            tx, session_id, turn_id, value, idempotency_key=key, process_epoch=epoch
        )


def respond(tx: Tx, session_id: str, epoch: int, turn_id: str, value: JsonValue) -> TurnView:
    """Sets (or replaces) the response delivered with a successful outcome
    (TurnSettling once the Turn settles)."""
    session = guards.runner(tx, session_id, epoch)
    turn = guards.unsettled(guards.active(tx, session, turn_id))
    return turn_view(turns.responded(tx, turn, value))


def complete(
    tx: Tx, session_id: str, epoch: int, turn_id: str, result: JsonValue | NoResult = NO_RESULT
) -> TurnView:
    """Settles the Turn as completed, with ``result`` (None is JSON null) or without one."""
    return turn_view(
        _settle(tx, session_id, epoch, turn_id, "completed", _completing(tx, result))[0]
    )


def fail(tx: Tx, session_id: str, epoch: int, turn_id: str, error: ErrorInfo) -> TurnView:
    """Settles the Turn as failed with ``error`` (bounded to what the Turn CRD holds)."""
    return turn_view(_settle(tx, session_id, epoch, turn_id, "failed", _failing(tx, error))[0])


def _completing(tx: Tx, result: JsonValue | NoResult) -> Settling:
    return lambda turn, ending: turns.completing(tx, turn, result, ending=ending)


def _failing(tx: Tx, error: ErrorInfo) -> Settling:
    return lambda turn, ending: turns.failing(tx, turn, error, ending=ending)


Settling = Callable[[TurnRow, bool], TurnRow]
"""A Turn's settlement: ``(turn, ending)``, whether it ends in the same transaction
(``turns.completing``'s ``ending``)."""


def _settle(
    tx: Tx,
    session_id: str,
    epoch: int,
    turn_id: str,
    outcome: Outcome,
    settling: Settling,
) -> tuple[TurnRow, SessionRow | None]:
    """Starts settlement: no more sends, unstarted messages rejected, outcome kept.

    The outcome commits (with its event) as soon as no started message
    handler is pending, which is at once unless callbacks are still running.
    Repeating the call that settled the Turn returns it unchanged. Answers the
    Session too, as the settlement left it, when it has it (a read fewer after).
    Answers the Turn's row, not its view: a settlement that takes the next Turn reads
    its status alone, and a view is a pydantic validation of every field."""
    session = guards.runner(tx, session_id, epoch)
    turn, pending_messages = turns.require_with_pending(tx, session_id, turn_id)
    if outcome in (turn.status, turn.settling):
        return turn, session
    turn = guards.unsettled(guards.running(session, turn))
    pending = messages.pending(tx, turn.id) if pending_messages else []
    waiting = [message for message in pending if message.status == "admitted"]
    handling = len(waiting) < len(pending)  # a handler started and not reported
    # Ending at once, the Turn's row is written once, by its end.
    turn = settling(turn, not handling)
    reject_waiting_messages(tx, turn, reason="turn_settling", waiting=waiting)
    return settle_if_drained(tx, session, turn, handling=handling)
