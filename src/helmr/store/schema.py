"""The schema of the timeline store, and how SQLite connections are configured.

The DDL is written for SQLite; the PostgreSQL backend runs the same scripts
through its dialect (:meth:`helmr.store.dialect.Dialect.ddl`), so a migration
is written once for both.

Timestamps are ISO-8601 UTC text with microseconds (fixed width, so they
compare correctly as text); JSON payloads are text. A SQL NULL payload means
"absent" and is distinct from the JSON text ``null``.
"""

from __future__ import annotations

import sqlite3
from typing import Literal

from helmr.store.migrations import MIGRATIONS

SCHEMA_VERSION = 12

Synchronous = Literal["NORMAL", "FULL"]

# A new database's schema, written once; an older one is brought to it by
# helmr.store.migrations (tests/unit/store/test_store.py holds the two equal).
_SCHEMA = """
-- A Session: its state, its live process, its limits (resolved once from its Actor
-- and its own overrides, limits_resolved_at on), the preparation of its runner
-- processes, and how far the status mirror has followed its timeline.
CREATE TABLE sessions (
    id                   TEXT PRIMARY KEY,
    namespace            TEXT NOT NULL,
    name                 TEXT NOT NULL,
    actor                TEXT NOT NULL,
    workspace            TEXT NOT NULL,
    key                  TEXT,
    idempotency_key      TEXT,
    status               TEXT NOT NULL CHECK (status IN ('open', 'closing', 'closed', 'failed')),
    hold_id              TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    consecutive_losses   INTEGER NOT NULL DEFAULT 0,
    process_epoch        INTEGER NOT NULL DEFAULT 0,
    process_live         INTEGER NOT NULL DEFAULT 0,
    stop_reason          TEXT,
    stop_deadline_at     TEXT,
    active_turn_id       TEXT,
    cancel_requested_at  TEXT,
    close_how            TEXT CHECK (close_how IN ('close', 'cancel', 'idle')),
    closed_at            TEXT,
    failure_reason       TEXT,
    max_turn_duration_s  REAL,
    created_at           TEXT NOT NULL,
    last_turn_seq        INTEGER NOT NULL DEFAULT 0,
    last_event_seq       INTEGER NOT NULL DEFAULT 0,
    retained_after       INTEGER NOT NULL DEFAULT 0,
    limits_resolved_at   TEXT,
    queue_limit          INTEGER,
    max_run_duration_s   REAL,
    idle_ttl_s           REAL,
    idle_timeout_s       INTEGER,
    retry_max_attempts   INTEGER,
    retry_backoff_s      REAL,
    run_deadline_at      TEXT,
    prepare_deadline_at  TEXT,
    preparation_failures INTEGER NOT NULL DEFAULT 0,
    retry_at             TEXT,
    mirrored_event_seq   INTEGER NOT NULL DEFAULT 0,
    awaiting_cut         INTEGER,
    starts_fenced_epoch  INTEGER
);
CREATE UNIQUE INDEX sessions_idempotency ON sessions (namespace, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- A Workspace is owned by one Session at a time, until that Session has ended
-- and its process is gone.
CREATE UNIQUE INDEX sessions_workspace_owner ON sessions (namespace, workspace)
    WHERE status IN ('open', 'closing') OR process_live = 1;
CREATE INDEX sessions_stop_deadline ON sessions (stop_deadline_at)
    WHERE stop_deadline_at IS NOT NULL;

CREATE TABLE holds (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    reason       TEXT NOT NULL,
    scope        TEXT NOT NULL CHECK (scope IN ('session', 'turn')),
    turn_id      TEXT,
    created_at   TEXT NOT NULL,
    released_at  TEXT,
    released_how TEXT
);

CREATE TABLE turns (
    id                TEXT PRIMARY KEY,
    session_id        TEXT NOT NULL REFERENCES sessions (id),
    sequence          INTEGER NOT NULL,
    status            TEXT NOT NULL CHECK (status IN
                          ('queued', 'running', 'completed', 'failed', 'interrupted', 'cancelled')),
    input             TEXT,
    has_result        INTEGER NOT NULL DEFAULT 0,
    result            TEXT,
    has_response      INTEGER NOT NULL DEFAULT 0,
    response          TEXT,
    error             TEXT,
    reason            TEXT,
    idempotency_key   TEXT,
    source            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    started_at        TEXT,
    ended_at          TEXT,
    epoch             INTEGER,
    deadline_at       TEXT,
    settling          TEXT CHECK (settling IN ('completed', 'failed')),
    messages_ready_at TEXT,
    payload_expired   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, sequence),
    UNIQUE (session_id, idempotency_key)
);
CREATE INDEX turns_queue ON turns (session_id, sequence) WHERE status = 'queued';
CREATE INDEX turns_deadline ON turns (deadline_at) WHERE status = 'running';
CREATE INDEX turns_expirable ON turns (ended_at)
    WHERE payload_expired = 0 AND ended_at IS NOT NULL;

CREATE TABLE messages (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES sessions (id),
    turn_id         TEXT NOT NULL REFERENCES turns (id),
    ord             INTEGER NOT NULL,
    data            TEXT,
    status          TEXT NOT NULL CHECK (status IN
                        ('admitted', 'started', 'delivered', 'rejected', 'unknown')),
    reason          TEXT,
    created_at      TEXT NOT NULL,
    payload_expired INTEGER NOT NULL DEFAULT 0,
    UNIQUE (turn_id, ord)
);

-- Clustered by (session, sequence): a page is one range scan.
CREATE TABLE events (
    session_id TEXT NOT NULL,
    sequence   INTEGER NOT NULL,
    id         TEXT NOT NULL UNIQUE,
    turn_id    TEXT,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    epoch      INTEGER,
    PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;

-- Output idempotency: scope is the turn id, or '' for Session-level output.
CREATE TABLE output_keys (
    session_id TEXT NOT NULL,
    scope      TEXT NOT NULL,
    key        TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    sequence   INTEGER NOT NULL,
    PRIMARY KEY (session_id, scope, key)
) WITHOUT ROWID;
-- The disk of each Workspace (its generation grows with each restore) and every
-- save requested of it, by version: a save never taken because a newer one of
-- the same disk was taken in its place is covered by it.
CREATE TABLE workspaces (
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    disk          INTEGER NOT NULL DEFAULT 1,
    restored_from INTEGER,
    last_version  INTEGER NOT NULL DEFAULT 0,
    taking        INTEGER,
    aligned       INTEGER NOT NULL DEFAULT 0,
    save_interval_s REAL NOT NULL DEFAULT 0,
    last_cut_at   TEXT,
    fork_snapshot TEXT,
    fork_session  TEXT,
    fork_workspace TEXT,
    fork_turn     TEXT,
    first_claim   TEXT,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE TABLE saves (
    namespace    TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    version      INTEGER NOT NULL,
    disk         INTEGER NOT NULL,
    session_id   TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    status       TEXT NOT NULL
        CHECK (status IN ('pending', 'ready', 'failed', 'lost', 'pruned', 'covered')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    error        TEXT,
    requested_at TEXT NOT NULL,
    ready_at     TEXT,
    covered_by   INTEGER,
    taken_at     TEXT,
    cut_at       TEXT,
    PRIMARY KEY (namespace, workspace, version)
);
CREATE INDEX saves_pending ON saves (requested_at) WHERE status = 'pending';

-- Runner pods adopted from a warm pool: each pod by one Session's process epoch,
-- once: its claim is that Session's Workspace's first disk (workspaces.first_claim).
CREATE TABLE adoptions (
    pod_uid    TEXT PRIMARY KEY,
    namespace  TEXT NOT NULL,
    pod_name   TEXT NOT NULL,
    claim      TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    epoch      INTEGER NOT NULL,
    adopted_at TEXT NOT NULL,
    UNIQUE (session_id, epoch)
);

-- Computer disk storage pressure per Session: the thresholds the disk of its
-- runner is measured against, and the episode in progress (state null: none).
CREATE TABLE storage (
    session_id     TEXT PRIMARY KEY REFERENCES sessions (id),
    capacity_bytes INTEGER NOT NULL,
    pause_at       REAL NOT NULL,
    stop_at        REAL NOT NULL,
    resolve_at     REAL NOT NULL,
    episode        INTEGER NOT NULL DEFAULT 0,
    state          TEXT CHECK (state IN ('paused', 'stopped')),
    hold_id        TEXT
) WITHOUT ROWID;

-- The term of the leader of the control plane (helmr.store.leadership): one row,
-- term 0 and no holder until a leader claims one.
CREATE TABLE leader_term (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    term   INTEGER NOT NULL,
    holder TEXT NOT NULL
);
INSERT INTO leader_term (id, term, holder) VALUES (1, 0, '');
"""


def connect(path: str, *, synchronous: Synchronous, read_only: bool) -> sqlite3.Connection:
    """A connection in autocommit mode: transactions are explicit ``BEGIN``s.

    WAL lets readers run beside the one writer. ``synchronous=NORMAL`` in WAL
    mode keeps every committed transaction across a process crash (SIGKILL):
    the commit is in the WAL file, only an OS crash or power loss can lose
    the last commits. ``FULL`` also survives those, at an fsync per commit.
    ``check_same_thread`` is off because the store closes every connection
    from the thread that shuts it down; each connection is still used by one
    thread at a time.
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    if read_only:
        conn.execute("PRAGMA query_only = 1")
    return conn


def scripts(version: int) -> list[str]:
    """The DDL scripts that bring a database of ``version`` (0: a new one) to
    :data:`SCHEMA_VERSION`, in SQLite's spelling (PostgreSQL's backend
    translates each statement); refuses a version it does not know."""
    if version != 0 and version not in MIGRATIONS:
        raise RuntimeError(
            f"timeline store schema version {version} is not {SCHEMA_VERSION}; "
            "use the Helmr release that wrote it"
        )
    if version == 0:
        return [_SCHEMA]
    return [MIGRATIONS[v] for v in range(version, SCHEMA_VERSION)]


def statements(script: str) -> list[str]:
    """A script's statements (no statement here has a ``;`` inside it)."""
    return [statement for statement in script.split(";") if statement.strip()]


def migrate(conn: sqlite3.Connection) -> None:
    """Creates the schema in a new database, or brings an older one up to date
    (one transaction); refuses a database of a version it does not know."""
    conn.execute("PRAGMA journal_mode = WAL")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    steps = scripts(version)
    conn.execute("BEGIN IMMEDIATE")
    try:
        for script in steps:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
