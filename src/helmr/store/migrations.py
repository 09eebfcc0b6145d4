"""The upgrades of an older timeline store to the current schema, each kept as it
first shipped (``helmr.store.schema`` holds a new database's schema, written once;
tests/unit/store/test_store.py holds a migrated database equal to a new one).
"""

from __future__ import annotations

# Workspace disks and their saves (version 3): the migration from version 2.
_DISKS_DDL = """
CREATE TABLE workspaces (
    namespace     TEXT NOT NULL,
    name          TEXT NOT NULL,
    disk          INTEGER NOT NULL DEFAULT 1,
    restored_from INTEGER,
    last_version  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;

CREATE TABLE saves (
    namespace    TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    version      INTEGER NOT NULL,
    disk         INTEGER NOT NULL,
    session_id   TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'ready', 'failed', 'lost', 'pruned')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    error        TEXT,
    requested_at TEXT NOT NULL,
    ready_at     TEXT,
    PRIMARY KEY (namespace, workspace, version)
);
CREATE INDEX saves_pending ON saves (requested_at) WHERE status = 'pending';
"""

# A Session's limits, resolved once from its Actor (and its own overrides), and
# the preparation of its runner processes (version 4): the migration from
# version 3.
_LIMITS_DDL = """
ALTER TABLE sessions ADD COLUMN limits_resolved_at TEXT;
ALTER TABLE sessions ADD COLUMN queue_limit INTEGER;
ALTER TABLE sessions ADD COLUMN max_run_duration_s REAL;
ALTER TABLE sessions ADD COLUMN idle_ttl_s REAL;
ALTER TABLE sessions ADD COLUMN idle_timeout_s INTEGER;
ALTER TABLE sessions ADD COLUMN retry_max_attempts INTEGER;
ALTER TABLE sessions ADD COLUMN retry_backoff_s REAL;
ALTER TABLE sessions ADD COLUMN run_deadline_at TEXT;
ALTER TABLE sessions ADD COLUMN prepare_deadline_at TEXT;
ALTER TABLE sessions ADD COLUMN preparation_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN retry_at TEXT;
"""

# Computer disk pressure per Session (version 5): the thresholds its runner's
# disk is measured against, and the episode in progress (``state`` null: none).
# The migration from version 4.
_STORAGE_DDL = """
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
"""

# How far the status mirror has followed each Session's timeline (version 6):
# after a restart it goes on from there instead of rereading the timeline from
# its first event. The migration from 5.
_MIRROR_DDL = """
ALTER TABLE sessions ADD COLUMN mirrored_event_seq INTEGER NOT NULL DEFAULT 0;
"""

# The term of the control plane's leader (version 7; helmr.store.leadership):
# one row, term 0 and no holder until a leader claims one. The migration from 6.
# ``IF NOT EXISTS`` and ``DO
# NOTHING`` because before version 7 the first replica to stand for leader
# created the table and its row, so a version 6 database may have them.
_LEADER_DDL = """
CREATE TABLE IF NOT EXISTS leader_term (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    term   INTEGER NOT NULL,
    holder TEXT NOT NULL
);
INSERT INTO leader_term (id, term, holder) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;
"""

# Coalesced saves (version 8; helmr.control.disks): a save never taken because
# a newer one of the same disk was taken in its place is ``covered``, and
# ``covered_by`` names that newer save. SQLite cannot change a CHECK in place,
# so the table is copied (every row kept): the migration from 7.
_COVERED_DDL = """
CREATE TABLE saves_v8 (
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
    PRIMARY KEY (namespace, workspace, version)
);
INSERT INTO saves_v8 (namespace, workspace, version, disk, session_id, turn_id, status,
    attempts, error, requested_at, ready_at)
    SELECT namespace, workspace, version, disk, session_id, turn_id, status,
        attempts, error, requested_at, ready_at FROM saves;
DROP TABLE saves;
ALTER TABLE saves_v8 RENAME TO saves;
CREATE INDEX saves_pending ON saves (requested_at) WHERE status = 'pending';
"""

# Turn-aligned saves (version 9; helmr.control.disks): when a save was taken and
# its point in time cut, the save of each Workspace being taken, whether its
# saves are cut at Turns' ends (its disk backend cuts them, and can save it),
# its save policy (at most one save per save_interval_s) and when it last took
# one, the save of another Workspace a fork starts from (its lineage), and the
# save whose cut a Session's next Turn waits for. The migration from 8.
_CUTS_DDL = """
ALTER TABLE workspaces ADD COLUMN taking INTEGER;
ALTER TABLE workspaces ADD COLUMN aligned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN save_interval_s REAL NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN last_taken_at TEXT;
ALTER TABLE workspaces ADD COLUMN fork_snapshot TEXT;
ALTER TABLE workspaces ADD COLUMN fork_session TEXT;
ALTER TABLE workspaces ADD COLUMN fork_workspace TEXT;
ALTER TABLE workspaces ADD COLUMN fork_turn TEXT;
ALTER TABLE saves ADD COLUMN taken_at TEXT;
ALTER TABLE saves ADD COLUMN cut_at TEXT;
ALTER TABLE sessions ADD COLUMN awaiting_cut INTEGER;
"""

# Warm pools (version 10; helmr.control.adoptions): the runner pods adopted from a
# pool, and the claim a Workspace's first disk was adopted with. The migration from 9.
_ADOPTIONS_DDL = """
ALTER TABLE workspaces ADD COLUMN first_claim TEXT;
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
"""

# The save policy's interval counts from the last save's cut (version 11;
# helmr.control.disks): the point in time a save holds, not when it was asked for,
# so a cut slower than the interval still leaves the interval's Turns unsaved
# between two saves. The migration from 10.
_LAST_CUT_DDL = """
ALTER TABLE workspaces RENAME COLUMN last_taken_at TO last_cut_at;
"""

# An ending process's last look fences further starts for its epoch (version 12;
# helmr.control.turns.fence_starts). The migration from 11.
_FENCE_DDL = """
ALTER TABLE sessions ADD COLUMN starts_fenced_epoch INTEGER;
"""

# The statements that bring a database of version N (the key) to N + 1. Only
# additive changes, so a database keeps every row it had.
MIGRATIONS: dict[int, str] = {
    # 2: when the live process must have let go of an interrupted Turn.
    1: """
ALTER TABLE sessions ADD COLUMN stop_deadline_at TEXT;
CREATE INDEX sessions_stop_deadline ON sessions (stop_deadline_at)
    WHERE stop_deadline_at IS NOT NULL;
""",
    # 3: Workspace disks and their saves.
    2: _DISKS_DDL,
    # 4: resolved limits and runner preparation.
    3: _LIMITS_DDL,
    # 5: Computer disk pressure.
    4: _STORAGE_DDL,
    # 6: the status mirror's cursors.
    5: _MIRROR_DDL,
    # 7: the leader's term.
    6: _LEADER_DDL,
    # 8: coalesced saves.
    7: _COVERED_DDL,
    # 9: turn-aligned saves, the save policy, forks.
    8: _CUTS_DDL,
    # 10: warm pools' adoptions.
    9: _ADOPTIONS_DDL,
    # 11: the save policy counts from the last cut.
    10: _LAST_CUT_DDL,
    # 12: an ending process's fence against further starts.
    11: _FENCE_DDL,
}
