"""Immutable snapshots of store rows, decoded from SQLite.

They are what store functions return and what ``helmr.control`` reasons on;
``helmr.control.views`` turns them into the public models. The statuses are
``helmr.states``'.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta

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


@dataclass(frozen=True, slots=True)
class HoldRow:
    id: str
    session_id: str
    reason: HoldReason
    scope: HoldScope
    turn_id: str | None
    created_at: datetime
    released_at: datetime | None
    released_how: str | None

    @classmethod
    def load(cls, row: sqlite3.Row) -> HoldRow:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            reason=row["reason"],
            scope=row["scope"],
            turn_id=row["turn_id"],
            created_at=_time(row["created_at"]),
            released_at=load_time(row["released_at"]),
            released_how=row["released_how"],
        )


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
    hold: HoldRow | None
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
    limits: SessionLimits | None
    """The limits resolved once from the Actor (None until they are)."""
    run_deadline_at: datetime | None
    """When the live process's Run has lasted ``maxDurationSeconds``."""
    prepare_deadline_at: datetime | None
    """When the live process must be running, or its preparation has failed."""
    preparation_failures: int
    """Consecutive failed preparations; ``retry.maxAttempts`` of them fail the Session."""
    retry_at: datetime | None
    """No new process before this (the backoff after a failed preparation)."""

    @classmethod
    def load(cls, row: sqlite3.Row, hold: HoldRow | None) -> SessionRow:
        return cls(
            id=row["id"],
            namespace=row["namespace"],
            name=row["name"],
            actor=row["actor"],
            workspace=row["workspace"],
            key=row["key"],
            idempotency_key=row["idempotency_key"],
            status=row["status"],
            hold=hold,
            consecutive_failures=row["consecutive_failures"],
            consecutive_losses=row["consecutive_losses"],
            process_epoch=row["process_epoch"],
            process_live=bool(row["process_live"]),
            stop_reason=row["stop_reason"],
            stop_deadline_at=load_time(row["stop_deadline_at"]),
            active_turn_id=row["active_turn_id"],
            cancel_requested_at=load_time(row["cancel_requested_at"]),
            close_how=row["close_how"],
            closed_at=load_time(row["closed_at"]),
            failure_reason=row["failure_reason"],
            created_at=_time(row["created_at"]),
            last_turn_seq=row["last_turn_seq"],
            last_event_seq=row["last_event_seq"],
            retained_after=row["retained_after"],
            limits=None if row["limits_resolved_at"] is None else SessionLimits.load(row),
            run_deadline_at=load_time(row["run_deadline_at"]),
            prepare_deadline_at=load_time(row["prepare_deadline_at"]),
            preparation_failures=row["preparation_failures"],
            retry_at=load_time(row["retry_at"]),
        )


@dataclass(frozen=True, slots=True)
class SessionLimits:
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

    @classmethod
    def load(cls, row: sqlite3.Row) -> SessionLimits:
        return cls(
            queue_limit=row["queue_limit"],
            max_turn_duration=_seconds(row["max_turn_duration_s"]),
            max_run_duration=_seconds(row["max_run_duration_s"]),
            idle_ttl=_seconds(row["idle_ttl_s"]),
            idle_timeout_seconds=row["idle_timeout_s"],
            retry_max_attempts=row["retry_max_attempts"],
            retry_backoff=timedelta(seconds=row["retry_backoff_s"]),
        )


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


@dataclass(frozen=True, slots=True)
class TurnRow:
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

    @classmethod
    def load(cls, row: sqlite3.Row) -> TurnRow:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            sequence=row["sequence"],
            status=row["status"],
            input=load_json(row["input"]),
            has_result=bool(row["has_result"]),
            result=load_json(row["result"]),
            has_response=bool(row["has_response"]),
            response=load_json(row["response"]),
            error=load_json(row["error"]),
            reason=row["reason"],
            idempotency_key=row["idempotency_key"],
            source=row["source"],
            created_at=_time(row["created_at"]),
            started_at=load_time(row["started_at"]),
            ended_at=load_time(row["ended_at"]),
            epoch=row["epoch"],
            deadline_at=load_time(row["deadline_at"]),
            settling=row["settling"],
            messages_ready_at=load_time(row["messages_ready_at"]),
            payload_expired=bool(row["payload_expired"]),
        )


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: str
    session_id: str
    turn_id: str
    ord: int
    data: JsonValue
    status: MessageStatus
    reason: str | None
    created_at: datetime
    payload_expired: bool

    @classmethod
    def load(cls, row: sqlite3.Row) -> MessageRow:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            turn_id=row["turn_id"],
            ord=row["ord"],
            data=load_json(row["data"]),
            status=row["status"],
            reason=row["reason"],
            created_at=_time(row["created_at"]),
            payload_expired=bool(row["payload_expired"]),
        )


@dataclass(frozen=True, slots=True)
class DiskRow:
    namespace: str
    workspace: str
    disk: int
    """Generation of the disk the next runner mounts."""
    restored_from: int | None
    """The save version that disk is restored from; None: it started empty."""
    last_version: int


@dataclass(frozen=True, slots=True)
class SaveRow:
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

    @classmethod
    def load(cls, row: sqlite3.Row) -> SaveRow:
        return cls(
            namespace=row["namespace"],
            workspace=row["workspace"],
            version=row["version"],
            disk=row["disk"],
            session_id=row["session_id"],
            turn_id=row["turn_id"],
            status=row["status"],
            attempts=row["attempts"],
            error=row["error"],
            requested_at=_time(row["requested_at"]),
            ready_at=load_time(row["ready_at"]),
            covered_by=row["covered_by"],
        )


def _time(text: str) -> datetime:
    value = load_time(text)
    assert value is not None, "a NOT NULL timestamp column was NULL"
    return value


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
    limits: StorageLimits
    episode: int
    """How many episodes the Session has had; the current one's number while ``state`` is set."""
    state: EpisodeState | None
    """The open episode's state (``paused`` or ``stopped``); None: no episode."""
    hold_id: str | None
    """The hold the episode put (or found) on the Session; released: acknowledged."""

    @classmethod
    def load(cls, row: sqlite3.Row) -> StorageRow:
        return cls(
            session_id=row["session_id"],
            limits=StorageLimits(
                capacity_bytes=row["capacity_bytes"],
                pause_at=row["pause_at"],
                stop_at=row["stop_at"],
                resolve_at=row["resolve_at"],
            ),
            episode=row["episode"],
            state=row["state"],
            hold_id=row["hold_id"],
        )
