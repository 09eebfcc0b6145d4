"""The per-Session event timeline: appends, idempotent output, pages.

Why pages never skip or repeat: a sequence is taken from a counter on the
Session row inside the appending transaction, which holds that row until it
commits (SQLite's single writer, or PostgreSQL's row lock across replicas),
so sequences of a Session are committed in the order they are assigned,
without gaps, and a reader's snapshot holds either all of a commit or none
of it. A reader therefore never sees sequence n+1 without n, and ``after``
is an exact cursor.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from operator import attrgetter
from typing import Any, cast

from pydantic import JsonValue, TypeAdapter

from helmr.errors import InvalidInput, NotFound
from helmr.events import Event, EventKind, EventPage, normalize_content
from helmr.protocol.api_requests import MAX_PAGE, MAX_SAFE_INTEGER
from helmr.store.codec import DbValue, dump_json, dump_time, new_id
from helmr.store.dialect import Dialect
from helmr.store.tx import ReadTx, Tx

_COLUMNS = "id, session_id, turn_id, sequence, created_at, kind, data, epoch"
_EVENT_FIELDS = (
    "'id', id, 'session_id', session_id, 'turn_id', turn_id, 'sequence', sequence,"
    " 'created_at', created_at, 'kind', kind, 'data', {data}, 'process_epoch', epoch"
)
_EVENT_LIST: TypeAdapter[list[Event]] = TypeAdapter(list[Event])
SessionChange = tuple[str, tuple[DbValue, ...]]
"""Columns of the Session's row an append sets too (:func:`append`'s ``session_change``):
the ``SET`` terms, with a placeholder for each of the values that follow."""


@cache
def _taking(sets: str, answering_session: bool = False) -> tuple[str, str]:
    """The statement that takes the Session's next event sequence (and sets ``sets``
    with it), only if the event is new; and the one that also inserts the event,
    where a ``WITH`` may update (``Dialect.updates_in_with``): one statement, no row
    if the event was there. Both answer the sequence as ``last_event_seq``, with the
    Session's whole row, as the statement left it, when ``answering_session``. One
    pair per ``SET`` the code writes."""
    take = (
        f"UPDATE sessions SET last_event_seq = last_event_seq + 1{sets}"
        " WHERE id = ? AND NOT EXISTS (SELECT 1 FROM events WHERE id = ?)"
        f" RETURNING {'*' if answering_session else 'last_event_seq'}"
    )
    insert = (
        f"INSERT INTO events ({_COLUMNS})"
        # Typed: a parameter in a SELECT's list is not typed by the column it goes to.
        " SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), last_event_seq,"
        " CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT) FROM taken"
    )
    if answering_session:
        take_and_insert = f"WITH taken AS ({take}), inserted AS ({insert}) SELECT * FROM taken"
    else:
        take_and_insert = f"WITH taken AS ({take}) {insert} RETURNING sequence AS last_event_seq"
    return take, take_and_insert


def append(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    turn_id: str | None = None,
    event_id: str | None = None,
    process_epoch: int | None = None,
    session_change: SessionChange | None = None,
) -> Event:
    """Appends one event with the Session's next sequence.

    With an ``event_id`` (a lifecycle fact's deterministic id) that is already
    stored, nothing is appended and the stored event is returned: the check
    comes before the sequence is taken, so a repeat leaves no gap.
    ``session_change`` is set on the Session's row either way: with the sequence,
    in its statement (one update of the row where there were two), or on its own
    for a repeat.
    """
    event, _ = _append(tx, session_id, kind, data, turn_id, event_id, process_epoch, session_change)
    assert event is not None, "an appended event is answered unless told not to be"
    return event


def append_unanswered(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    *,
    turn_id: str | None,
    event_id: str,
    process_epoch: int | None,
    session_change: SessionChange | None,
    answering_session: bool = False,
) -> Any:
    """:func:`append`, for a caller that does not read the event (a lifecycle fact,
    ``helmr.control.record``): no :class:`Event` built, a validation of each of its
    fields, three a no-op Turn. With ``answering_session`` (and a ``session_change``)
    it answers the Session's row, as the change left it (``UPDATE ... RETURNING``: no
    read of it after); else None."""
    fact = (tx, session_id, kind, data, turn_id, event_id, process_epoch, session_change)
    _, row = _append(*fact, answering_session=answering_session, answering_event=False)
    return row


def _append(
    tx: Tx,
    session_id: str,
    kind: EventKind,
    data: JsonValue,
    turn_id: str | None,
    event_id: str | None,
    process_epoch: int | None,
    session_change: SessionChange | None = None,
    *,
    answering_session: bool = False,
    answering_event: bool = True,
) -> tuple[Event | None, Any]:
    """:func:`append`, under the Session's lock (taken here if the caller has not);
    with the Session's row when ``answering_session`` (else None), and the event only
    when ``answering_event`` (else None)."""
    tx.lock(session_id)
    if event_id is None:
        event_id = new_id("evt")
    encoded = dump_json(data)
    created_at = dump_time(tx.now)
    sets, set_values = session_change or ("", ())
    take_sequence, take_and_insert = _taking(sets and f", {sets}", answering_session)
    # The sequence is taken only if the event is new (one statement, where a probe
    # and the counter's update were two), so a repeat leaves no gap.
    take = (*set_values, session_id, event_id)
    if tx.dialect.updates_in_with:  # and the event inserted with it: one round trip
        values = (event_id, session_id, turn_id, created_at, kind, encoded, process_epoch)
        taken = tx.conn.execute(take_and_insert, (*take, *values)).fetchone()
    else:
        taken = tx.conn.execute(take_sequence, take).fetchone()
        if taken is not None:
            sequence = taken["last_event_seq"]
            tx.conn.execute(
                f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (event_id, session_id, turn_id, sequence, created_at, kind, encoded, process_epoch),
            )
    if taken is None:
        # A repeat (rare, so the stored event is read only now), or no such Session.
        existing = get(tx, event_id)
        if existing is None:
            raise NotFound(f"no session {session_id}", session_id=session_id)
        row = None
        if sets:
            returning = " RETURNING *" if answering_session else ""
            changed = tx.conn.execute(
                f"UPDATE sessions SET {sets} WHERE id = ?{returning}", (*set_values, session_id)
            )
            row = changed.fetchone() if answering_session else None
            tx.touch(session_id)
        return existing, row
    tx.touch(session_id)
    if not answering_event:
        return None, taken if answering_session else None
    event = Event(
        id=event_id,
        session_id=session_id,
        turn_id=turn_id,
        sequence=taken["last_event_seq"],
        created_at=datetime.fromisoformat(created_at),
        kind=kind,
        data=data,
        process_epoch=process_epoch,
    )
    return event, taken if answering_session else None


def append_output(
    tx: Tx,
    session_id: str,
    turn_id: str | None,
    value: JsonValue,
    *,
    idempotency_key: str | None,
    process_epoch: int | None,
) -> Event:
    """Appends ``turn.output`` content; a repeated idempotency key returns the first event.

    Keys are scoped to the Turn (or to Session-level output when ``turn_id``
    is None) and live as long as the event they name is retained.
    """
    scope = turn_id or ""
    tx.lock(session_id)  # before the key's check, so two replicas cannot both miss it
    if idempotency_key is not None:
        known = tx.conn.execute(
            "SELECT event_id FROM output_keys WHERE session_id = ? AND scope = ? AND key = ?",
            (session_id, scope, idempotency_key),
        ).fetchone()
        if known is not None:
            existing = get(tx, known["event_id"])
            assert existing is not None, "output keys are removed with their events"
            return existing
    # Content fragments are JSON objects; TypedDicts are not dicts to mypy.
    content = cast(JsonValue, normalize_content(value))
    kind = EventKind.TURN_OUTPUT
    event, _ = _append(tx, session_id, kind, content, turn_id, None, process_epoch)
    assert event is not None, "an appended event is answered unless told not to be"
    if idempotency_key is not None:
        tx.conn.execute(
            "INSERT INTO output_keys (session_id, scope, key, event_id, sequence)"
            " VALUES (?, ?, ?, ?, ?)",
            (session_id, scope, idempotency_key, event.id, event.sequence),
        )
    return event


def get(rt: ReadTx, event_id: str) -> Event | None:
    found = _events(rt, "SELECT * FROM events WHERE id = ?", (event_id,))
    return found[0] if found else None


def page(rt: ReadTx, session_id: str, after: int, limit: int) -> EventPage:
    """Up to ``limit`` events with sequence > ``after``, in sequence order."""
    check_page(after, limit)
    session = rt.conn.execute(
        "SELECT retained_after FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if session is None:
        raise NotFound(f"no session {session_id}", session_id=session_id)
    found = _events(
        rt,
        "SELECT * FROM events WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
        (session_id, after, limit + 1),
    )
    records = found[:limit]
    return EventPage(
        records=records,
        next_after=records[-1].sequence if records else after,
        has_more=len(found) > limit,
        retained_after=session["retained_after"],
    )


def check_page(after: int, limit: int) -> None:
    if not 0 <= after <= MAX_SAFE_INTEGER:
        raise InvalidInput("after must be a nonnegative safe integer", after=after)
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}", limit=limit)


def _events(rt: ReadTx, select: str, args: tuple[object, ...]) -> list[Event]:
    """The selected events, decoded in one pass.

    The database renders the rows as one JSON array that pydantic validates
    in Rust: this is the hot read path, and it is several times faster than
    decoding each row's data and building each model in Python.
    """
    (text,) = rt.conn.execute(_aggregate(rt.dialect, select), args).fetchone()
    events = _EVENT_LIST.validate_json(text)
    # Neither database promises that an aggregate keeps its input's order; the
    # list is sorted already, so this costs one pass.
    events.sort(key=attrgetter("sequence"))
    return events


@cache
def _aggregate(dialect: Dialect, select: str) -> str:
    """The rows of ``select`` as one JSON array of events, in ``dialect``."""
    fields = _EVENT_FIELDS.format(data=dialect.json_parse.format("data"))
    events = dialect.json_array_agg.format(f"{dialect.json_object}({fields})")
    return f"SELECT {events} FROM ({select}) AS selected"
