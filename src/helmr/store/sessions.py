"""Session rows: creation, lookup, each change of state by its name (Control says
when; no column name leaves this module), and the queries the operator side polls."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from helmr.errors import NotFound
from helmr.states import CloseHow, HoldReason, SessionStatus, StopReason
from helmr.store import holds, turns
from helmr.store.codec import DbValue, dump_time, load_time, new_id
from helmr.store.rows import SessionLimits, SessionRow
from helmr.store.timeline import SessionChange
from helmr.store.tx import ReadTx, Tx


def insert(
    tx: Tx,
    *,
    namespace: str,
    name: str,
    actor: str,
    workspace: str,
    key: str | None,
    idempotency_key: str | None,
) -> SessionRow:
    session_id = new_id("ses")
    tx.conn.execute(
        "INSERT INTO sessions (id, namespace, name, actor, workspace, key, idempotency_key,"
        " status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)",
        (
            session_id,
            namespace,
            name,
            actor,
            workspace,
            key,
            idempotency_key,
            dump_time(tx.now),
        ),
    )
    return require(tx, session_id)


def get(rt: ReadTx, session_id: str) -> SessionRow | None:
    """The Session; in a write transaction, its row is locked until commit (``Tx.lock``)."""
    row = rt.conn.execute(
        f"SELECT * FROM sessions WHERE id = ?{rt.locking(session_id)}", (session_id,)
    ).fetchone()
    return None if row is None else _load(rt, row)


def require(rt: ReadTx, session_id: str) -> SessionRow:
    session = get(rt, session_id)
    if session is None:
        raise _not_found(session_id)
    return session


def require_counted(rt: ReadTx, session_id: str, *, lock: bool = False) -> tuple[SessionRow, int]:
    """The Session and how many of its Turns are queued, in one statement: a round
    trip fewer on PostgreSQL for every Session read (a restart reads each Session
    several times: kopf's resume, its runner's token check and reconnection).
    ``lock``: in a write transaction, its row is locked until commit, as :func:`get`'s."""
    locking = rt.locking(session_id) if lock else ""
    row = rt.conn.execute(
        f"SELECT *, ({turns.COUNT_QUEUED}) AS queued_turns FROM sessions WHERE id = ?{locking}",
        (session_id, session_id),
    ).fetchone()
    if row is None:
        raise _not_found(session_id)
    return _load(rt, row), int(row["queued_turns"])


def name(rt: ReadTx, session_id: str) -> tuple[str, str]:
    """The Session's namespace and name (NotFound if there is none)."""
    row = rt.conn.execute(
        "SELECT namespace, name FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise _not_found(session_id)
    return row["namespace"], row["name"]


def names_not_ended(rt: ReadTx, limit: int) -> list[tuple[str, str, str]]:
    """(id, namespace, name) of the newest ``limit`` Sessions open or closing."""
    rows = rt.conn.execute(
        "SELECT id, namespace, name FROM sessions WHERE status IN ('open', 'closing')"
        " ORDER BY created_at DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [(row["id"], row["namespace"], row["name"]) for row in rows]


def _load(rt: ReadTx, row: Any) -> SessionRow:
    return SessionRow.load(row, partial(holds.get, rt))


def _not_found(session_id: str) -> NotFound:
    return NotFound(f"no session {session_id}", session_id=session_id)


def by_idempotency_key(rt: ReadTx, namespace: str, idempotency_key: str) -> SessionRow | None:
    return _one(
        rt,
        "SELECT * FROM sessions WHERE namespace = ? AND idempotency_key = ?",
        (namespace, idempotency_key),
    )


def workspace_owner(rt: ReadTx, namespace: str, workspace: str) -> SessionRow | None:
    """The Session that holds the Workspace now (not ended, or its process not gone)."""
    return _one(
        rt,
        "SELECT * FROM sessions WHERE namespace = ? AND workspace = ?"
        " AND (status IN ('open', 'closing') OR process_live = 1)",
        (namespace, workspace),
    )


def _update(tx: Tx, session_id: str, **changes: object) -> None:
    tx.update("sessions", session_id, changes)
    tx.touch(session_id)


def hold(tx: Tx, session_id: str, hold_id: str) -> None:
    """The Session is held by ``hold_id`` (its row in ``holds``)."""
    _update(tx, session_id, hold_id=hold_id)


def release_hold(tx: Tx, session_id: str, *, reset_failures: bool = False) -> None:
    """The Session is held no more; ``reset_failures``: its process failures count anew."""
    changes: dict[str, object] = {"hold_id": None}
    if reset_failures:
        changes["consecutive_failures"] = 0
    _update(tx, session_id, **changes)


def begin_closing(tx: Tx, session_id: str, how: CloseHow) -> None:
    """The Session closes ``how``; a cancel is asked for now."""
    changes: dict[str, object] = {"status": "closing", "close_how": how}
    if how == "cancel":
        changes["cancel_requested_at"] = tx.now
    _update(tx, session_id, **changes)


def closed(tx: Tx, session_id: str) -> None:
    _update(tx, session_id, status="closed", closed_at=tx.now, hold_id=None)


def failed(tx: Tx, session_id: str, reason: str, stop: StopReason | None) -> None:
    """The Session failed for ``reason``; its live process, if any, is asked to ``stop``."""
    changes = {"failure_reason": reason, "closed_at": tx.now, "hold_id": None}
    _update(tx, session_id, status="failed", stop_reason=stop, **changes)


def ask_stop(tx: Tx, session_id: str, reason: str, *, overdue: bool = False) -> None:
    """The live process must stop, for ``reason``; ``overdue``: its stop deadline
    has passed, and is no more."""
    changes: dict[str, object] = {"stop_reason": reason}
    if overdue:
        changes["stop_deadline_at"] = None
    _update(tx, session_id, **changes)


def stop_deadline(tx: Tx, session_id: str, at: datetime | None) -> None:
    """When the live process must have let go of an interrupted Turn (None: no more)."""
    _update(tx, session_id, stop_deadline_at=at)


def run_deadline(tx: Tx, session_id: str, at: datetime | None) -> None:
    """When the live process's Run ends (``maxDurationSeconds``)."""
    _update(tx, session_id, run_deadline_at=at)


def process_started(tx: Tx, session_id: str, epoch: int, prepare_by: datetime) -> None:
    """Process ``epoch`` is live, preparing until ``prepare_by`` at the latest."""
    _update(
        tx,
        session_id,
        process_epoch=epoch,
        process_live=True,
        stop_reason=None,
        prepare_deadline_at=prepare_by,
        retry_at=None,
    )


def prepared(tx: Tx, session_id: str, run_ends: datetime | None) -> None:
    """The live process's preparation succeeded; its Run ends at ``run_ends``."""
    _update(
        tx,
        session_id,
        prepare_deadline_at=None,
        preparation_failures=0,
        retry_at=None,
        run_deadline_at=run_ends,
    )


def preparation_failed(tx: Tx, session_id: str, attempt: int, retry_at: datetime) -> None:
    """Its ``attempt``-th preparation in a row failed: no new process before ``retry_at``."""
    _update(tx, session_id, preparation_failures=attempt, retry_at=retry_at)


def process_ended(tx: Tx, session_id: str) -> None:
    """No process of the Session is live: no stop, deadline or Run is pending."""
    _update(
        tx,
        session_id,
        process_live=False,
        stop_reason=None,
        stop_deadline_at=None,
        prepare_deadline_at=None,
        run_deadline_at=None,
    )


def process_failures(tx: Tx, session_id: str, count: int, hold_id: str | None) -> None:
    """``count`` process failures in a row; ``hold_id``: the hold the last one caused."""
    changes: dict[str, object] = {"consecutive_failures": count}
    if hold_id is not None:
        changes["hold_id"] = hold_id
    _update(tx, session_id, **changes)


def execution_losses(tx: Tx, session_id: str, count: int) -> None:
    """``count`` execution losses in a row."""
    _update(tx, session_id, consecutive_losses=count)


def turn_starting(turn_id: str) -> SessionChange:
    """Turn ``turn_id`` is the Session's active one: a change its ``turn.running``
    writes (``timeline.append``'s ``session_change``)."""
    return ("active_turn_id = ?", (turn_id,))


def turn_ending(turn_id: str, *, completed: bool, awaiting_cut: int | None = None) -> SessionChange:
    """Turn ``turn_id`` ended: it is active no more; ``completed``: the failures and
    losses in a row are over; ``awaiting_cut``: the next Turn waits for that save's
    cut (None: as it was). A change the event of its end writes (``timeline.append``'s
    ``session_change``)."""
    sets = "active_turn_id = CASE WHEN active_turn_id = ? THEN NULL ELSE active_turn_id END"
    values: tuple[DbValue, ...] = (turn_id,)
    if completed:
        sets += ", consecutive_failures = 0, consecutive_losses = 0"
    if awaiting_cut is not None:
        sets += ", awaiting_cut = ?"
        values += (awaiting_cut,)
    return sets, values


def loaded(rt: ReadTx, row: Any) -> SessionRow:
    """A Session from its row as a statement answered it (``RETURNING *``)."""
    return _load(rt, row)


def await_cut(tx: Tx, session_id: str, version: int | None) -> None:
    """The Session's next Turn waits for save ``version``'s cut (None: for none)."""
    _update(tx, session_id, awaiting_cut=version)


def fence_starts(tx: Tx, session_id: str, epoch: int) -> None:
    """No Turn is started for process ``epoch`` from now on (it is ending)."""
    _update(tx, session_id, starts_fenced_epoch=epoch)


def resolve_limits(tx: Tx, session_id: str, limits: SessionLimits) -> None:
    set_limits(tx, session_id, limits, limits_resolved_at=tx.now)


def set_limits(tx: Tx, session_id: str, limits: SessionLimits, **changes: object) -> None:
    _update(
        tx,
        session_id,
        **changes,
        queue_limit=limits.queue_limit,
        max_turn_duration_s=limits.max_turn_duration,
        max_run_duration_s=limits.max_run_duration,
        idle_ttl_s=limits.idle_ttl,
        idle_timeout_s=limits.idle_timeout_seconds,
        retry_max_attempts=limits.retry_max_attempts,
        retry_backoff_s=limits.retry_backoff,
    )


def without_limits(rt: ReadTx) -> list[SessionRow]:
    """Open or closing Sessions whose limits are not resolved yet."""
    return _many(
        rt,
        "SELECT * FROM sessions WHERE status IN ('open', 'closing')"
        " AND limits_resolved_at IS NULL ORDER BY created_at",
    )


_NEEDING_RUNNER = (
    "SELECT s.* FROM sessions s WHERE s.status IN ('open', 'closing')"
    " AND s.hold_id IS NULL AND s.process_live = 0"
    " AND (s.retry_at IS NULL OR s.retry_at <= ?)"
    " AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.status = 'queued')"
)


def needing_runner(rt: ReadTx, now: datetime) -> list[SessionRow]:
    """Open or closing, not held, no live process, queued work, and not backing off
    after a failed preparation."""
    return _many(rt, _NEEDING_RUNNER + " ORDER BY s.created_at", (dump_time(now),))


def needs_runner(rt: ReadTx, session_id: str, now: datetime) -> SessionRow | None:
    """The Session, if it is one :func:`needing_runner` lists."""
    return _one(rt, _NEEDING_RUNNER + " AND s.id = ?", (dump_time(now), session_id))


def past_preparation_deadline(rt: ReadTx, now: datetime) -> list[SessionRow]:
    """Live processes still not running at their preparation deadline."""
    return _many(
        rt,
        "SELECT * FROM sessions WHERE process_live = 1 AND stop_reason IS NULL"
        " AND prepare_deadline_at <= ? ORDER BY prepare_deadline_at",
        (dump_time(now),),
    )


def idle_past_run_deadline(rt: ReadTx, now: datetime) -> list[SessionRow]:
    """Live processes past their Run's deadline that hold no Turn (so nothing to settle)."""
    return _many(
        rt,
        "SELECT * FROM sessions WHERE process_live = 1 AND stop_reason IS NULL"
        " AND active_turn_id IS NULL AND run_deadline_at <= ? ORDER BY run_deadline_at",
        (dump_time(now),),
    )


def next_run_deadline(rt: ReadTx) -> datetime | None:
    (deadline,) = rt.conn.execute(
        "SELECT min(run_deadline_at) FROM sessions WHERE process_live = 1 AND stop_reason IS NULL"
    ).fetchone()
    return load_time(deadline)


def idle_with_ttl(rt: ReadTx) -> list[tuple[SessionRow, datetime]]:
    """Open, unheld Sessions with an idle expiry and no work, each with when it
    became idle: its last Turn's end, else its creation."""
    rows = rt.conn.execute(
        "SELECT s.*, coalesce((SELECT max(t.ended_at) FROM turns t WHERE t.session_id = s.id),"
        " s.created_at) AS idle_since FROM sessions s WHERE s.status = 'open'"
        " AND s.idle_ttl_s IS NOT NULL AND s.hold_id IS NULL AND s.active_turn_id IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id"
        " AND t.status IN ('queued', 'running'))"
    ).fetchall()
    return [(_listed(rt, row), _since(row["idle_since"])) for row in rows]


def _since(text: str) -> datetime:
    value = load_time(text)
    assert value is not None, "idle_since is never NULL"
    return value


def live(rt: ReadTx) -> list[SessionRow]:
    """Sessions with a live runner process."""
    return _many(rt, "SELECT * FROM sessions WHERE process_live = 1 ORDER BY created_at")


def stopping(rt: ReadTx) -> list[SessionRow]:
    """Sessions whose live process has been asked to stop."""
    return _many(
        rt,
        "SELECT * FROM sessions WHERE process_live = 1 AND stop_reason IS NOT NULL"
        " ORDER BY created_at",
    )


_AWAITING_RELEASE = (
    "FROM sessions WHERE stop_deadline_at IS NOT NULL AND process_live = 1 AND stop_reason IS NULL"
)
"""Live processes given until ``stop_deadline_at`` to let go of an interrupted Turn,
and not asked to stop for another reason."""


def past_stop_deadline(rt: ReadTx, now: datetime) -> list[SessionRow]:
    """Sessions whose live process has not let go of an interrupted Turn in time."""
    return _many(
        rt,
        f"SELECT * {_AWAITING_RELEASE} AND stop_deadline_at <= ? ORDER BY stop_deadline_at",
        (dump_time(now),),
    )


def next_stop_deadline(rt: ReadTx) -> datetime | None:
    (deadline,) = rt.conn.execute(f"SELECT min(stop_deadline_at) {_AWAITING_RELEASE}").fetchone()
    return load_time(deadline)


def counts(rt: ReadTx) -> list[tuple[SessionStatus, HoldReason | None, int]]:
    """How many Sessions there are per (status, reason of the hold on them or None)."""
    rows = rt.conn.execute(
        "SELECT s.status, h.reason, count(*) FROM sessions s"
        " LEFT JOIN holds h ON h.id = s.hold_id GROUP BY s.status, h.reason"
    ).fetchall()
    # status has a CHECK constraint; a hold's reason is only ever written from HoldReason.
    return [(status, reason, n) for status, reason, n in rows]


def _one(rt: ReadTx, sql: str, args: tuple[object, ...]) -> SessionRow | None:
    row = rt.conn.execute(sql, args).fetchone()
    return None if row is None else _listed(rt, row)


def _many(rt: ReadTx, sql: str, args: tuple[object, ...] = ()) -> list[SessionRow]:
    return [_listed(rt, row) for row in rt.conn.execute(sql, args).fetchall()]


def _listed(rt: ReadTx, row: Any) -> SessionRow:
    """A Session a list selected whole (``*``). Where rows are locked (a write on
    PostgreSQL), it is locked and read again: another writer may have changed it
    since the list was read. Elsewhere it is the listed row, not a statement
    more per Session: a restart reads every live process."""
    return require(rt, row["id"]) if rt.locks_rows else _load(rt, row)
