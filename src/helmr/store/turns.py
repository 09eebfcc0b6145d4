"""Turn rows: admission with a per-session sequence, the FIFO queue, deadlines."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from helmr.errors import NotFound
from helmr.states import NO_RESULT, ErrorInfo, NoResult, TerminalTurnStatus, TurnStatus
from helmr.store import messages
from helmr.store.codec import dump_json, dump_time, load_json, load_time, new_id
from helmr.store.rows import TurnRow
from helmr.store.tx import ReadTx, Tx

_TAKE_SEQUENCE = (
    "UPDATE sessions SET last_turn_seq = last_turn_seq + 1 WHERE id = ? RETURNING last_turn_seq"
)
_INSERT = (
    "INSERT INTO turns (id, session_id, sequence, status, input, idempotency_key, source,"
    " created_at)"
)
_TAKE_AND_INSERT = (
    f"WITH taken AS ({_TAKE_SEQUENCE}) {_INSERT}"
    # Typed: a parameter in a SELECT's list is not typed by the column it goes to.
    " SELECT CAST(? AS TEXT), CAST(? AS TEXT), last_turn_seq, 'queued', CAST(? AS TEXT),"
    " CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT) FROM taken RETURNING *"
)
"""Where a ``WITH`` may update (``Dialect.updates_in_with``): the Session's next Turn
sequence taken and the Turn inserted with it, one round trip where there were two."""


def insert(
    tx: Tx, session_id: str, *, input: JsonValue, idempotency_key: str | None, source: str
) -> TurnRow:
    """A new queued Turn of the Session, with its next sequence. On SQLite answered as
    it is stored without reading it back: a ``RETURNING`` statement there keeps its rows
    in a table of its own before it answers the first, and then the row's 21 columns
    were decoded (docs/sizing.md, issue 31); every column is one given here or the
    schema's default for a new Turn, and ``input`` is answered as the column's JSON
    reads back, as a row read would. PostgreSQL's one statement answers its row (built
    here instead, it measured 1.3% more instructions a no-op Turn, not looked into)."""
    encoded = dump_json(input)
    stored_source = str(source)  # as the column holds it: text, not a vocabulary's enum
    values = (encoded, idempotency_key, stored_source, dump_time(tx.now))
    turn_id = new_id("turn")
    tx.touch(session_id)
    tx.queue_changed(session_id, queued=True)
    if tx.dialect.updates_in_with:
        taken = tx.conn.execute(_TAKE_AND_INSERT, (session_id, turn_id, session_id, *values))
        return TurnRow.load(taken.fetchone())
    (sequence,) = tx.conn.execute(_TAKE_SEQUENCE, (session_id,)).fetchone()
    inserting = f"{_INSERT} VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)"
    tx.conn.execute(inserting, (turn_id, session_id, sequence, *values))
    status: TurnStatus = "queued"
    given = (turn_id, session_id, sequence, status, load_json(encoded))
    admitted = (idempotency_key, stored_source, tx.now)
    return TurnRow(*(*given, *_NO_OUTCOME, *admitted, *_NOT_STARTED))  # the columns' order


_NO_OUTCOME: tuple[bool, None, bool, None, None, None] = (False, None, False, None, None, None)
"""A new Turn's ``has_result``, ``result``, ``has_response``, ``response``, ``error``
and ``reason``: the schema's defaults (or NULL)."""
_NOT_STARTED: tuple[None, None, None, None, None, None, bool] = (*(None,) * 6, False)
"""A new Turn's ``started_at``, ``ended_at``, ``epoch``, ``deadline_at``, ``settling``,
``messages_ready_at`` and ``payload_expired``: the schema's defaults (or NULL)."""


def get(rt: ReadTx, turn_id: str) -> TurnRow | None:
    row = rt.conn.execute("SELECT * FROM turns WHERE id = ?", (turn_id,)).fetchone()
    return None if row is None else TurnRow.load(row)


def require(rt: ReadTx, session_id: str, turn_id: str) -> TurnRow:
    """The Turn, which must belong to the Session (ids are not secrets across Sessions)."""
    turn = get(rt, turn_id)
    if turn is None or turn.session_id != session_id:
        raise _not_found(session_id, turn_id)
    return turn


def _not_found(session_id: str, turn_id: str) -> NotFound:
    return NotFound(f"no turn {turn_id} in session {session_id}", turn_id=turn_id)


def require_with_pending(rt: ReadTx, session_id: str, turn_id: str) -> tuple[TurnRow, int]:
    """:func:`require`, with how many of the Turn's messages are not yet handled, in one
    statement: a settlement looks at them, and most Turns have none to read."""
    row = rt.conn.execute(
        f"SELECT *, ({messages.COUNT_PENDING}) AS pending_messages FROM turns WHERE id = ?",
        (turn_id, turn_id),
    ).fetchone()
    if row is None or row["session_id"] != session_id:
        raise _not_found(session_id, turn_id)
    return TurnRow.load(row), int(row["pending_messages"])


def by_idempotency_key(rt: ReadTx, session_id: str, idempotency_key: str) -> TurnRow | None:
    row = rt.conn.execute(
        "SELECT * FROM turns WHERE session_id = ? AND idempotency_key = ?",
        (session_id, idempotency_key),
    ).fetchone()
    return None if row is None else TurnRow.load(row)


def queued(rt: ReadTx, session_id: str) -> list[TurnRow]:
    """The FIFO queue, head first."""
    rows = rt.conn.execute(
        "SELECT * FROM turns WHERE session_id = ? AND status = 'queued' ORDER BY sequence",
        (session_id,),
    ).fetchall()
    return [TurnRow.load(row) for row in rows]


def next_queued(rt: ReadTx, session_id: str) -> TurnRow | None:
    row = rt.conn.execute(
        "SELECT * FROM turns WHERE session_id = ? AND status = 'queued' ORDER BY sequence LIMIT 1",
        (session_id,),
    ).fetchone()
    return None if row is None else TurnRow.load(row)


COUNT_QUEUED = "SELECT count(*) FROM turns WHERE session_id = ? AND status = 'queued'"
"""The Session's queued Turns, one parameter: its id (also a column of a Session read)."""


def count_queued(rt: ReadTx, session_id: str) -> int:
    (count,) = rt.conn.execute(COUNT_QUEUED, (session_id,)).fetchone()
    return int(count)


def last_started(rt: ReadTx, session_id: str) -> str | None:
    """The id of the Session's Turn that started last (None: none ever started)."""
    row = rt.conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND started_at IS NOT NULL"
        " ORDER BY sequence DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return None if row is None else str(row["id"])


def past_deadline(rt: ReadTx, now: datetime) -> list[TurnRow]:
    rows = rt.conn.execute(
        "SELECT * FROM turns WHERE status = 'running' AND deadline_at <= ? ORDER BY deadline_at",
        (dump_time(now),),
    ).fetchall()
    return [TurnRow.load(row) for row in rows]


def next_deadline(rt: ReadTx) -> datetime | None:
    (deadline,) = rt.conn.execute(
        "SELECT min(deadline_at) FROM turns WHERE status = 'running'"
    ).fetchone()
    return load_time(deadline)


def _update(tx: Tx, turn: TurnRow, **changes: object) -> TurnRow:
    """The Turn with ``changes`` applied, as stored."""
    row = tx.updated("turns", turn.id, changes)
    assert row is not None, f"turn {turn.id} is gone"
    tx.touch(turn.session_id)
    return TurnRow.load(row)


# The state changes of a Turn's row, each named for what it is (Control says when).


def _changed(tx: Tx, turn: TurnRow, fields: dict[str, Any], **columns: object) -> TurnRow:
    """``turn`` with ``fields`` (values as the row holds them, none of them JSON) and
    ``columns`` (as the columns hold them) written, answered as ``turn`` with
    ``fields``, not read back: ``turn`` is the row as this transaction read it (under
    its Session's lock where writes are concurrent), and ``columns`` hold what ``turn``
    already has. Where the caller needs little of the row (the Turn's start and end,
    every Turn), that is an ``UPDATE`` without ``RETURNING *`` and no row built from
    its 21 columns."""
    tx.update("turns", turn.id, fields | columns)
    tx.touch(turn.session_id)
    return replace(turn, **fields)


def started(tx: Tx, turn: TurnRow, epoch: int, deadline: datetime | None) -> TurnRow:
    """``turn`` runs on process ``epoch``, until ``deadline`` at most (``maxTurnDuration``)."""
    tx.queue_changed(turn.session_id, queued=False)
    begun = {"status": "running", "started_at": tx.now, "epoch": epoch, "deadline_at": deadline}
    return _changed(tx, turn, begun)


def released(tx: Tx, turn: TurnRow) -> TurnRow:
    """``turn`` is queued again: its process gave it back unseen. Its ``epoch`` stays
    the releasing process's (a queued Turn's view shows none): its next start is not
    its first (``helmr.control.turns``)."""
    tx.queue_changed(turn.session_id, queued=True)
    return _update(tx, turn, status="queued", started_at=None, deadline_at=None)


def no_deadline(tx: Tx, turn: TurnRow) -> TurnRow:
    """``turn``'s ``maxTurnDuration`` no longer applies (a stop is under way)."""
    return _update(tx, turn, deadline_at=None)


def messages_ready(tx: Tx, turn: TurnRow) -> TurnRow:
    """The runner takes ``turn``'s messages from now on."""
    return _update(tx, turn, messages_ready_at=tx.now)


def responded(tx: Tx, turn: TurnRow, value: JsonValue) -> TurnRow:
    """``value`` is the response delivered with a successful outcome."""
    return _update(tx, turn, has_response=True, response=dump_json(value))


def completing(
    tx: Tx, turn: TurnRow, result: JsonValue | NoResult, *, ending: bool = False
) -> TurnRow:
    """The runner settles ``turn`` as completed, with ``result`` (or none). Written now;
    or, ``ending`` (no message handler keeps it settling: it ends next, in this
    transaction), only the row as it will be: :func:`ended` writes the outcome with
    the end, one update of the Turn's row where there were two."""
    has_result, value = (False, None) if result is NO_RESULT else (True, result)
    if ending:
        return replace(turn, settling="completed", has_result=has_result, result=value)
    encoded = dump_json(value) if has_result else None
    return _update(tx, turn, settling="completed", has_result=has_result, result=encoded)


def failing(tx: Tx, turn: TurnRow, error: ErrorInfo, *, ending: bool = False) -> TurnRow:
    """The runner settles ``turn`` as failed with ``error``; ``ending``: as :func:`completing`'s."""
    data: JsonValue = asdict(error)
    if ending:
        return replace(turn, settling="failed", error=data)
    return _update(tx, turn, settling="failed", error=dump_json(data))


def ended(tx: Tx, turn: TurnRow, status: TerminalTurnStatus, reason: str | None) -> TurnRow:
    """``turn`` reached ``status`` (for ``reason``), with its outcome as the row has it
    (a settlement's, written before or not: :func:`completing`); a response goes only
    with a successful outcome."""
    changes: dict[str, Any] = {
        "status": status,
        "ended_at": tx.now,
        "settling": None,
        # As the column answers it: text, not a vocabulary's enum (helmr.states).
        "reason": None if reason is None else str(reason),
    }
    if status != "completed":
        changes |= {"has_response": False, "response": None}
    return _changed(
        tx,
        turn,
        changes,
        has_result=turn.has_result,
        result=dump_json(turn.result) if turn.has_result else None,
        error=None if turn.error is None else dump_json(turn.error),
    )
