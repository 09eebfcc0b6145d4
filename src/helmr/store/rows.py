"""Immutable snapshots of store rows, decoded from SQLite.

They are what store functions return and what ``helmr.control`` reasons on;
``helmr.control.views`` turns them into the public models. The statuses are
``helmr.states``'.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any, ClassVar, Self, TypeVar

from pydantic import JsonValue

from helmr.actor_limits import DEFAULT_QUEUE_LIMIT, DEFAULT_RETRY_ATTEMPTS
from helmr.states import (
    CloseHow,
    EpisodeState,
    HoldReason,
    HoldScope,
    MessageStatus,
    Outcome,
    SaveStatus,
    SessionStatus,
    TurnStatus,
)
from helmr.store.codec import load_json, load_time

_Row = TypeVar("_Row")


def _load(cls: type[_Row], row: sqlite3.Row, **given: object) -> _Row:
    """A ``cls`` read from ``row``: each field the column of its name (or the one the
    class's ``_COLUMNS`` names for it, where a row looked up by name scanned the
    Session's 38 columns for each limit), decoded as the field's type says, unless
    ``given`` holds it (a field that is no column)."""
    return _built(cls, _layout(cls, row.keys(), tuple(given)), row, given)


def _built(cls: type[_Row], layout: _Layout, row: sqlite3.Row, given: Mapping[str, object]) -> _Row:
    """:func:`_load` with the ``layout`` of ``row``'s statement."""
    # A PostgreSQL row is a tuple whose subscript is Python (``PgRow``, which takes
    # names too): its values are taken from a plain tuple of them, in C, where the
    # layout's ``itemgetter`` called that subscript once per field.
    plain = tuple(row) if isinstance(row, tuple) else row
    values: tuple[Any, ...] | list[Any] = layout.columns(plain)
    if layout.decoded:
        values = list(values)
        for index, decode in layout.decoded:
            values[index] = decode(values[index])
    return cls(*values, **given)


@dataclass(frozen=True, slots=True)
class _Layout:
    """How a row of one statement's columns becomes a ``cls``: the columns of the
    fields read from them, in the fields' order, taken in one C call
    (``operator.itemgetter``) and passed positionally, where a comprehension indexed
    the row once per field and built the keywords the constructor then matched one
    by one; and the few of them that decode (by position among them)."""

    names: Sequence[str]
    """The statement's column names, as its rows' ``keys()`` answer them."""
    position: dict[str, int]
    """Each column's position: a column that is no field read by it, not by name."""
    columns: Callable[[sqlite3.Row], tuple[Any, ...]]
    decoded: tuple[tuple[int, Callable[[Any], object]], ...]


def _layout(cls: type[Any], columns: Sequence[str], given: tuple[str, ...]) -> _Layout:
    """The :class:`_Layout` of ``cls`` from ``columns``, the fields ``given`` aside (the
    last fields of ``cls``, so the others can be passed by position), worked out once
    per class and statement: a row's column looked up by name is a scan of its names
    (sqlite3.Row), and a Session row's 38 read so took longer than building the row
    (docs/sizing.md, "CPU per Turn, cut by profile"). Found by the row's width and
    its names compared, not by the names as a key: SQLite's are new strings in every
    row, so a key of them was a tuple built and its 38 names hashed at every read."""
    key = (cls, len(columns), given)
    for known in _LAYOUTS.get(key, ()):
        # The same object on PostgreSQL (PgRow's names); equal strings on SQLite.
        if known.names is columns or known.names == columns:
            return known
    known = _new_layout(cls, columns, given)
    _LAYOUTS.setdefault(key, []).append(known)
    return known


def _new_layout(cls: type[Any], columns: Sequence[str], given: tuple[str, ...]) -> _Layout:
    position = {column: n for n, column in enumerate(columns)}
    named: dict[str, str] = getattr(cls, "_COLUMNS", {})
    read = [f for f in fields(cls) if f.name not in given]
    column = {f.name: named.get(f.name, f.name) for f in read}
    missing = [name for name in column.values() if name not in position]
    if missing:
        raise LookupError(f"{cls.__name__}: no column {', '.join(missing)}")
    if {f.name for f in fields(cls)[len(read) :]} != set(given):
        raise TypeError(f"{cls.__name__}: the fields given ({', '.join(given)}) come last")
    return _Layout(
        names=columns,
        position=position,
        columns=_getter(tuple(position[column[f.name]] for f in read)),
        # The annotations are text (``from __future__ import annotations``).
        decoded=tuple(
            (n, _DECODERS[str(f.type)]) for n, f in enumerate(read) if str(f.type) in _DECODERS
        ),
    )


_LAYOUTS: dict[tuple[type[Any], int, tuple[str, ...]], list[_Layout]] = {}
"""Bounded by the code: one per class and distinct column list its statements read."""


def _getter(positions: tuple[int, ...]) -> Callable[[sqlite3.Row], tuple[Any, ...]]:
    """The row's values at ``positions``, a tuple even of one (``itemgetter`` of a
    single position answers the value alone)."""
    if len(positions) == 1:
        (only,) = positions
        return lambda row: (row[only],)
    return itemgetter(*positions)


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def _duration(value: float) -> timedelta:
    return timedelta(seconds=value)


def _time(text: str) -> datetime:
    value = load_time(text)
    assert value is not None, "a NOT NULL timestamp column was NULL"
    return value


_DECODERS: dict[str, Callable[[Any], object]] = {
    # SQLite holds no booleans, times or JSON: their columns are integers and text.
    "bool": bool,
    "datetime": _time,
    "datetime | None": load_time,
    "JsonValue": load_json,
    # Nor durations: their columns are seconds.
    "timedelta": _duration,
    "timedelta | None": _seconds,
}


class _Loaded:
    """A row read from its columns by field name (:func:`_load`)."""

    __slots__ = ()

    @classmethod
    def load(cls, row: sqlite3.Row) -> Self:
        return _load(cls, row)


@dataclass(frozen=True, slots=True)
class HoldRow(_Loaded):
    id: str
    session_id: str
    reason: HoldReason
    scope: HoldScope
    turn_id: str | None
    created_at: datetime
    released_at: datetime | None
    released_how: str | None


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    namespace: str
    name: str
    actor: str
    workspace: str
    key: str | None
    idempotency_key: str | None
    status: SessionStatus
    consecutive_failures: int
    consecutive_losses: int
    process_epoch: int
    process_live: bool
    stop_reason: str | None
    stop_deadline_at: datetime | None
    """When the live process must have let go of the Turn interrupted on it, or be stopped."""
    active_turn_id: str | None
    cancel_requested_at: datetime | None
    close_how: CloseHow | None
    closed_at: datetime | None
    failure_reason: str | None
    created_at: datetime
    last_turn_seq: int
    last_event_seq: int
    retained_after: int
    run_deadline_at: datetime | None
    """When the live process's Run has lasted ``maxDurationSeconds``."""
    prepare_deadline_at: datetime | None
    """When the live process must be running, or its preparation has failed."""
    preparation_failures: int
    """Consecutive failed preparations; ``retry.maxAttempts`` of them fail the Session."""
    retry_at: datetime | None
    """No new process before this (the backoff after a failed preparation)."""
    awaiting_cut: int | None
    """The save (its version) whose cut the next Turn waits for: a save belongs to
    exactly the state after its Turn (helmr.control.disks)."""
    starts_fenced_epoch: int | None
    """The process epoch that asked for no more Turns (its ``start: false`` look as it
    ended): none is started for it from then on (helmr.control.turns.fence_starts)."""
    # Not columns, so last (_load passes the columns by position).
    hold: HoldRow | None
    limits: SessionLimits | None
    """The limits resolved once from the Actor (None until they are)."""

    @classmethod
    def load(cls, row: sqlite3.Row, hold: Callable[[str], HoldRow | None]) -> SessionRow:
        """The Session of ``row``, its hold (if any) read by ``hold`` from its id. The
        hold's and the limits' columns are found by position (the layout's): by name
        each was a scan of the row's 38 names, three a Session read."""
        layout = _layout(cls, row.keys(), _SESSION_GIVEN)
        at = layout.position
        hold_id = row[at["hold_id"]]
        limits = None if row[at["limits_resolved_at"]] is None else SessionLimits.load(row)
        given = {"hold": None if hold_id is None else hold(hold_id), "limits": limits}
        return _built(cls, layout, row, given)


_SESSION_GIVEN = ("hold", "limits")
"""A :class:`SessionRow`'s fields that are no column."""


@dataclass(frozen=True, slots=True)
class SessionLimits(_Loaded):
    """A Session's resolved limits (its own override, else its Actor's, else what the
    actor's code declared once a Run reported it: ``helmr.control.limits``). None is
    a limit no one set: no limit, or for the two that always have one the default
    (:attr:`queue`, :attr:`retry_attempts`)."""

    queue_limit: int | None
    max_turn_duration: timedelta | None
    max_run_duration: timedelta | None
    idle_ttl: timedelta | None
    idle_timeout_seconds: int | None
    retry_max_attempts: int | None
    retry_backoff: timedelta

    @property
    def queue(self) -> int:
        """The queue limit in force."""
        return DEFAULT_QUEUE_LIMIT if self.queue_limit is None else self.queue_limit

    @property
    def retry_attempts(self) -> int:
        """The failed preparations in a row that fail the Session."""
        attempts = self.retry_max_attempts
        return DEFAULT_RETRY_ATTEMPTS if attempts is None else attempts

    _COLUMNS: ClassVar[dict[str, str]] = {
        "max_turn_duration": "max_turn_duration_s",
        "max_run_duration": "max_run_duration_s",
        "idle_ttl": "idle_ttl_s",
        "idle_timeout_seconds": "idle_timeout_s",
        "retry_backoff": "retry_backoff_s",
    }


@dataclass(frozen=True, slots=True)
class TurnRow(_Loaded):
    id: str
    session_id: str
    sequence: int
    status: TurnStatus
    input: JsonValue
    has_result: bool
    result: JsonValue
    has_response: bool
    response: JsonValue
    error: JsonValue
    reason: str | None
    idempotency_key: str | None
    source: str
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    epoch: int | None
    deadline_at: datetime | None
    settling: Outcome | None
    messages_ready_at: datetime | None
    payload_expired: bool


@dataclass(frozen=True, slots=True)
class MessageRow(_Loaded):
    id: str
    session_id: str
    turn_id: str
    ord: int
    data: JsonValue
    status: MessageStatus
    reason: str | None
    created_at: datetime
    payload_expired: bool


@dataclass(frozen=True, slots=True)
class DiskRow:
    namespace: str
    workspace: str
    disk: int
    """Generation of the disk the next runner mounts."""
    restored_from: int | None
    """The save version that disk is restored from; None: it started empty."""
    last_version: int
    taking: int | None
    """The save being taken (its snapshot asked for, not yet ready or failed)."""
    aligned: bool
    """Its saves are cut at Turns' ends: a Session's next Turn waits for the cut."""
    save_interval: timedelta
    """At most one save per this long (zero: one at every Turn's end)."""
    last_cut_at: datetime | None
    """When a save of it was last cut (its point in time): the save policy's
    interval counts from there."""

    fork: ForkRow | None
    """The save of another Workspace its disks start from (a fork), or None."""
    first_claim: str | None = None
    """The claim of disk generation 1 when it was adopted from a warm pool (a pooled
    runner pod's); None: that disk's claim has its Workspace's name."""


def save_due(last_cut_at: datetime | None, interval: timedelta, now: datetime) -> bool:
    """Whether a save policy of one save per ``interval`` lets a save be taken at
    ``now``, the last one cut at ``last_cut_at`` (None: never)."""
    return last_cut_at is None or now - last_cut_at >= interval


def take_due(
    version: int,
    awaiting_cut: int | None,
    process_live: bool,
    last_cut_at: datetime | None,
    interval: timedelta,
    now: datetime,
) -> bool:
    """Whether save ``version`` of a Workspace whose saves are cut at Turns' ends is to
    be taken at ``now``: its Session waits for its cut, its Session's process is gone
    (suspended idle, or closed: its disk is saved then whatever the policy), or the
    save policy's interval has passed since the last cut."""
    return awaiting_cut == version or not process_live or save_due(last_cut_at, interval, now)


@dataclass(frozen=True, slots=True)
class ForkRow:
    """Where a forked Workspace's disks start: a ready save of another Workspace in
    its namespace, of the Turn of the Session forked."""

    snapshot: str
    """The save's VolumeSnapshot."""
    session_id: str
    workspace: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class SaveRow(_Loaded):
    namespace: str
    workspace: str
    version: int
    disk: int
    """The disk generation the save snapshots."""
    session_id: str
    turn_id: str
    status: SaveStatus
    attempts: int
    error: str | None
    requested_at: datetime
    ready_at: datetime | None
    """When its state became a committed Computer version: its own snapshot's
    readiness or, ``covered``, the readiness of the save that covered it."""
    covered_by: int | None
    """``covered``: the version of the newer save taken in its place."""
    taken_at: datetime | None
    """When its snapshot was last asked for (None: never taken, or covered)."""
    cut_at: datetime | None
    """When its point in time was cut (the snapshot's ``creationTime`` seen)."""


@dataclass(frozen=True, slots=True)
class StorageLimits:
    """What a Session's Computer disk is measured against: its capacity (the claim's
    size) and the used fractions at which an episode pauses, stops and resolves."""

    capacity_bytes: int
    pause_at: float
    stop_at: float
    resolve_at: float


@dataclass(frozen=True, slots=True)
class StorageRow:
    session_id: str
    episode: int
    """How many episodes the Session has had; the current one's number while ``state`` is set."""
    state: EpisodeState | None
    """The open episode's state (``paused`` or ``stopped``); None: no episode."""
    hold_id: str | None
    """The hold the episode put (or found) on the Session; released: acknowledged."""
    limits: StorageLimits
    """Not a column, so last (_load passes the columns by position)."""

    @classmethod
    def load(cls, row: sqlite3.Row) -> StorageRow:
        return _load(cls, row, limits=_load(StorageLimits, row))


@dataclass(frozen=True, slots=True)
class AdoptionRow:
    """A runner pod taken from a warm pool by one Session's process."""

    pod_uid: str
    namespace: str
    pod_name: str
    claim: str
    session_id: str
    epoch: int
