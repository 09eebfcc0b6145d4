"""Workspace disks and their saves: which disk a Workspace's next runner mounts,
and every save (snapshot) requested of it, by version.

A Workspace's disk has a generation (``disk``): it starts at 1 and grows when an
execution loss replaces the disk with one restored from the last ready save
(``restored_from``). Save versions grow by one per request, per Workspace.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from helmr.states import SaveStatus
from helmr.store.codec import db_value, dump_time, load_time
from helmr.store.rows import DiskRow, ForkRow, SaveRow, save_due, take_due
from helmr.store.tx import ReadTx, Tx


def ensure(tx: Tx, namespace: str, workspace: str) -> DiskRow:
    tx.conn.execute(
        "INSERT INTO workspaces (namespace, name) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (namespace, workspace),
    )
    disk = get(tx, namespace, workspace)
    assert disk is not None
    return disk


def get(rt: ReadTx, namespace: str, workspace: str) -> DiskRow | None:
    row = rt.conn.execute(
        "SELECT * FROM workspaces WHERE namespace = ? AND name = ?", (namespace, workspace)
    ).fetchone()
    return None if row is None else _disk(namespace, workspace, row)


def known(rt: ReadTx, namespace: str, workspace: str) -> bool:
    """Whether the store holds a disk or a save of a Workspace of that name."""
    row = rt.conn.execute(
        "SELECT EXISTS (SELECT 1 FROM workspaces WHERE namespace = ? AND name = ?)"
        " OR EXISTS (SELECT 1 FROM saves WHERE namespace = ? AND workspace = ?)",
        (namespace, workspace, namespace, workspace),
    ).fetchone()
    return bool(row[0])


def _disk(namespace: str, workspace: str, row: sqlite3.Row) -> DiskRow:
    return DiskRow(
        namespace=namespace,
        workspace=workspace,
        disk=row["disk"],
        restored_from=row["restored_from"],
        last_version=row["last_version"],
        taking=row["taking"],
        aligned=bool(row["aligned"]),
        save_interval=timedelta(seconds=row["save_interval_s"]),
        last_cut_at=load_time(row["last_cut_at"]),
        fork=None
        if row["fork_snapshot"] is None
        else ForkRow(
            snapshot=row["fork_snapshot"],
            session_id=row["fork_session"],
            workspace=row["fork_workspace"],
            turn_id=row["fork_turn"],
        ),
        first_claim=row["first_claim"],
    )


def replace_disk(tx: Tx, namespace: str, workspace: str, restored_from: int | None) -> DiskRow:
    """The next runner gets a new disk, restored from that save (or empty)."""
    tx.conn.execute(
        "UPDATE workspaces SET disk = disk + 1, restored_from = ?, taking = NULL"
        " WHERE namespace = ? AND name = ?",
        (restored_from, namespace, workspace),
    )
    disk = get(tx, namespace, workspace)
    assert disk is not None
    return disk


_SAVE_POLICY = "last_version, disk, aligned, taking, save_interval_s, last_cut_at"
"""What a save's request reads of its Workspace's row: the version it takes, its disk
and its save policy (the row's other columns, and the save's own, are not read)."""
_TAKE_VERSION = (
    "INSERT INTO workspaces (namespace, name, last_version) VALUES (?, ?, 1)"
    " ON CONFLICT (namespace, name) DO UPDATE"
    " SET last_version = workspaces.last_version + 1 RETURNING"
)
_NEXT_VERSION = f"{_TAKE_VERSION} {_SAVE_POLICY}"
_INSERT_SAVE = (
    "INSERT INTO saves (namespace, workspace, version, disk, session_id, turn_id, status,"
    " requested_at)"
)
_REQUEST_SAVE = (
    f"WITH workspace AS ({_TAKE_VERSION} namespace, name, {_SAVE_POLICY}),"
    f" save AS ({_INSERT_SAVE}"
    # Typed: a parameter in a SELECT's list is not typed by the column it goes to.
    " SELECT namespace, name, last_version, disk, CAST(? AS TEXT), CAST(? AS TEXT), 'pending',"
    " CAST(? AS TEXT) FROM workspace RETURNING version)"
    " SELECT save.version AS last_version, workspace.aligned, workspace.taking,"
    " workspace.save_interval_s, workspace.last_cut_at FROM save, workspace"
)
"""Where a ``WITH`` may update (``Dialect.updates_in_with``): the Workspace's next
save version taken and the save inserted with it, answered with the Workspace's save
policy, one round trip where there were two."""


def request_save(
    tx: Tx, namespace: str, workspace: str, session_id: str, turn_id: str
) -> tuple[int, bool]:
    """A new pending save of the Workspace's current disk: its version, and whether
    it can be cut now, at its Turn's end: the Workspace's saves are cut at Turns'
    ends (``aligned``) and none is being taken.

    As this runs with every completed Turn: the Workspace's row (made if new) takes
    the next version and answers it with its disk and save policy, and the save is
    inserted; one statement where a ``WITH`` may update, two in SQLite (in process).
    Neither answers a whole row: only the version and the policy are read (both
    rows answered whole, and the save's built, were 2.4% of a no-op Turn's
    instructions on SQLite: docs/sizing.md, "The store's threads per Turn")."""
    requested = (session_id, turn_id, dump_time(tx.now))
    if tx.dialect.updates_in_with:
        policy = tx.conn.execute(_REQUEST_SAVE, (namespace, workspace, *requested)).fetchone()
    else:
        policy = tx.conn.execute(_NEXT_VERSION, (namespace, workspace)).fetchone()
        tx.conn.execute(
            f"{_INSERT_SAVE} VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
            (namespace, workspace, policy["last_version"], policy["disk"], *requested),
        )
    due = save_due(
        load_time(policy["last_cut_at"]), timedelta(seconds=policy["save_interval_s"]), tx.now
    )
    cut_now = bool(policy["aligned"]) and policy["taking"] is None and due
    return policy["last_version"], cut_now


def set_policy(
    tx: Tx, namespace: str, workspace: str, *, aligned: bool, interval: timedelta
) -> None:
    """Whether the Workspace's saves are cut at Turns' ends, and at most one per
    ``interval`` (made if new)."""
    tx.conn.execute(
        "INSERT INTO workspaces (namespace, name, aligned, save_interval_s) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (namespace, name) DO UPDATE"
        " SET aligned = excluded.aligned, save_interval_s = excluded.save_interval_s",
        (namespace, workspace, int(aligned), interval.total_seconds()),
    )


def set_fork(tx: Tx, namespace: str, workspace: str, fork: ForkRow) -> None:
    """The Workspace's disks start from ``fork`` (made if new)."""
    tx.conn.execute(
        "INSERT INTO workspaces (namespace, name) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (namespace, workspace),
    )
    tx.conn.execute(
        "UPDATE workspaces SET fork_snapshot = ?, fork_session = ?, fork_workspace = ?,"
        " fork_turn = ? WHERE namespace = ? AND name = ?",
        (fork.snapshot, fork.session_id, fork.workspace, fork.turn_id, namespace, workspace),
    )


def fork_snapshots(rt: ReadTx, namespace: str) -> set[str]:
    """The saves (VolumeSnapshot names) Workspaces of the namespace were forked from."""
    return {
        str(row[0])
        for row in rt.conn.execute(
            "SELECT fork_snapshot FROM workspaces WHERE namespace = ?"
            " AND fork_snapshot IS NOT NULL",
            (namespace,),
        )
    }


def save_of_turn(rt: ReadTx, namespace: str, workspace: str, turn_id: str) -> SaveRow | None:
    """The save requested when ``turn_id`` completed on the Workspace, if any."""
    row = rt.conn.execute(
        "SELECT * FROM saves WHERE namespace = ? AND workspace = ? AND turn_id = ?"
        " ORDER BY version DESC LIMIT 1",
        (namespace, workspace, turn_id),
    ).fetchone()
    return None if row is None else SaveRow.load(row)


def set_taking(tx: Tx, namespace: str, workspace: str, version: int | None) -> None:
    """Save ``version`` of the Workspace is being taken (None: none is any more)."""
    tx.conn.execute(
        "UPDATE workspaces SET taking = ? WHERE namespace = ? AND name = ?",
        (version, namespace, workspace),
    )


def set_cut(tx: Tx, namespace: str, workspace: str) -> None:
    """A save of the Workspace is cut now: its save policy's interval counts from here."""
    tx.conn.execute(
        "UPDATE workspaces SET last_cut_at = ? WHERE namespace = ? AND name = ?",
        (dump_time(tx.now), namespace, workspace),
    )


def require(rt: ReadTx, namespace: str, workspace: str) -> DiskRow:
    disk = get(rt, namespace, workspace)
    assert disk is not None, (namespace, workspace)
    return disk


def get_save(rt: ReadTx, namespace: str, workspace: str, version: int) -> SaveRow | None:
    row = rt.conn.execute(
        "SELECT * FROM saves WHERE namespace = ? AND workspace = ? AND version = ?",
        (namespace, workspace, version),
    ).fetchone()
    return None if row is None else SaveRow.load(row)


def require_save(rt: ReadTx, namespace: str, workspace: str, version: int) -> SaveRow:
    save = get_save(rt, namespace, workspace, version)
    assert save is not None, (namespace, workspace, version)
    return save


def update_save(tx: Tx, save: SaveRow, **changes: object) -> SaveRow:
    tx.conn.execute(
        f"UPDATE saves SET {', '.join(f'{name} = ?' for name in changes)}"
        " WHERE namespace = ? AND workspace = ? AND version = ?",
        (
            *(db_value(value) for value in changes.values()),
            save.namespace,
            save.workspace,
            save.version,
        ),
    )
    return require_save(tx, save.namespace, save.workspace, save.version)


def saves(
    rt: ReadTx, namespace: str, workspace: str, status: SaveStatus | None = None
) -> list[SaveRow]:
    """The Workspace's saves (of one status), newest first."""
    sql = "SELECT * FROM saves WHERE namespace = ? AND workspace = ?"
    args: tuple[object, ...] = (namespace, workspace)
    if status is not None:
        sql += " AND status = ?"
        args += (status,)
    return [SaveRow.load(row) for row in rt.conn.execute(sql + " ORDER BY version DESC", args)]


def covered_by(rt: ReadTx, namespace: str, workspace: str, version: int) -> list[SaveRow]:
    """The saves covered by save ``version``, oldest first."""
    return [
        SaveRow.load(row)
        for row in rt.conn.execute(
            "SELECT * FROM saves WHERE namespace = ? AND workspace = ? AND status = 'covered'"
            " AND covered_by = ? ORDER BY version",
            (namespace, workspace, version),
        )
    ]


_PENDING = "SELECT *, MAX(version) OVER (PARTITION BY namespace, workspace) AS newest FROM"
_STEPPED = (
    # With what decides whether the newest is due (take_due): its Workspace's policy,
    # its Session's process and wait.
    "SELECT p.*, w.aligned AS policy_aligned, w.save_interval_s AS policy_interval_s,"
    " w.last_cut_at AS policy_last_cut_at, ses.awaiting_cut AS session_awaiting_cut,"
    " ses.process_live AS session_process_live FROM ({pending}) AS p"
    " LEFT JOIN workspaces AS w ON w.namespace = p.namespace AND w.name = p.workspace"
    " LEFT JOIN sessions AS ses ON ses.id = p.session_id"
    " WHERE p.version = p.newest OR p.taken_at IS NOT NULL ORDER BY p.requested_at, p.version"
)
_TO_STEP = _STEPPED.format(pending=f"{_PENDING} saves WHERE status = 'pending'")
_TO_STEP_OF = _STEPPED.format(
    pending=(
        # A join, not an IN: each Workspace's saves read by its key, in the window's order.
        f"{_PENDING} (SELECT s.* FROM (SELECT DISTINCT namespace, workspace FROM sessions"
        " WHERE id IN ({ids})) AS used JOIN saves AS s"
        " ON s.namespace = used.namespace AND s.workspace = used.workspace"
        " WHERE s.status = 'pending') AS of_sessions"
    )
)

SESSIONS_AT_ONCE = 500
"""Sessions named in one read of :func:`to_step` (a statement's parameters are few)."""


def to_step(rt: ReadTx, session_ids: Collection[str] | None = None) -> list[SaveRow]:
    """The pending saves a disk keeper steps, oldest first: of each Workspace, those
    already taken (a snapshot to follow) and its newest, unless that one is not due
    (:func:`helmr.store.rows.take_due`: its take would be refused, a write
    transaction with every Turn's end under a save policy of one save per interval).
    The others wait, never taken, for the newest to cover them as it is taken
    (``take_save`` reads them there): under such a policy a Workspace gathers one with
    each Turn until then, and every pass and every wake of the keeper read them all
    (docs/sizing.md, "A restart's high water, again").

    ``session_ids``: of only the Workspaces these Sessions use (those a change of the
    store touched). Every Workspace's are a scan of every pending save: a keeper
    woken by each commit read them back to back under load (docs/sizing.md, "5,000
    Sessions after the workers, and the disk keeper's wake")."""
    if session_ids is None:
        return _stepped(rt, rt.conn.execute(_TO_STEP))
    ids = sorted(session_ids)
    if not ids:
        return []
    if len(ids) <= SESSIONS_AT_ONCE:
        return _to_step_of(rt, ids)
    # Sessions of one Workspace may fall in two reads: each save once.
    stepped = {
        (save.namespace, save.workspace, save.version): save
        for start in range(0, len(ids), SESSIONS_AT_ONCE)
        for save in _to_step_of(rt, ids[start : start + SESSIONS_AT_ONCE])
    }
    return sorted(stepped.values(), key=lambda save: (save.requested_at, save.version))


def _to_step_of(rt: ReadTx, session_ids: list[str]) -> list[SaveRow]:
    of_sessions = _TO_STEP_OF.format(ids=", ".join("?" * len(session_ids)))
    return _stepped(rt, rt.conn.execute(of_sessions, session_ids))


def _stepped(rt: ReadTx, rows: Iterable[sqlite3.Row]) -> list[SaveRow]:
    return [SaveRow.load(row) for row in rows if _steps(row, rt.now)]


def _steps(row: sqlite3.Row, now: datetime) -> bool:
    """Whether the keeper steps the save of ``row`` (a ``_STEPPED`` row) at ``now``:
    it was taken, its Workspace's saves are not cut at Turns' ends (no policy holds
    them), or it is due. Its Session or Workspace gone, the take is left to say."""
    if row["taken_at"] is not None or not row["policy_aligned"]:
        return True
    process_live = row["session_process_live"]
    return process_live is None or take_due(
        row["version"],
        row["session_awaiting_cut"],
        bool(process_live),
        load_time(row["policy_last_cut_at"]),
        timedelta(seconds=row["policy_interval_s"]),
        now,
    )


def count(rt: ReadTx, namespace: str, workspace: str, status: SaveStatus) -> int:
    """How many of the Workspace's saves have ``status``."""
    row = rt.conn.execute(
        "SELECT COUNT(*) AS n FROM saves WHERE namespace = ? AND workspace = ? AND status = ?",
        (namespace, workspace, status),
    ).fetchone()
    return int(row["n"])


def delete_workspace(tx: Tx, namespace: str, workspace: str) -> None:
    tx.conn.execute(
        "DELETE FROM saves WHERE namespace = ? AND workspace = ?", (namespace, workspace)
    )
    tx.conn.execute(
        "DELETE FROM workspaces WHERE namespace = ? AND name = ?", (namespace, workspace)
    )


def oldest_unsaved(rt: ReadTx) -> datetime | None:
    """When the oldest save not yet committed and still to be was requested: a
    pending one, or one a pending save covers (older than it). The recovery point
    of the Session whose disk it is lags since then."""
    row = rt.conn.execute(
        "SELECT MIN(COALESCE((SELECT MIN(c.requested_at) FROM saves c"
        " WHERE c.namespace = p.namespace AND c.workspace = p.workspace"
        " AND c.status = 'covered' AND c.covered_by = p.version), p.requested_at))"
        " FROM saves p WHERE p.status = 'pending'"
    ).fetchone()
    return None if row is None else load_time(row[0])


def count_taking(rt: ReadTx) -> int:
    """How many Workspaces have a save being taken (in flight)."""
    return int(
        rt.conn.execute("SELECT COUNT(*) FROM workspaces WHERE taking IS NOT NULL").fetchone()[0]
    )
