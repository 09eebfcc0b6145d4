"""Workspace disks and their saves: which disk a Workspace's next runner mounts,
and every save (snapshot) requested of it, by version.

A Workspace's disk has a generation (``disk``): it starts at 1 and grows when an
execution loss replaces the disk with one restored from the last ready save
(``restored_from``). Save versions grow by one per request, per Workspace.
"""

from __future__ import annotations

from helmr.states import SaveStatus
from helmr.store.codec import db_value, dump_time
from helmr.store.rows import DiskRow, SaveRow
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
    if row is None:
        return None
    return DiskRow(
        namespace=namespace,
        workspace=workspace,
        disk=row["disk"],
        restored_from=row["restored_from"],
        last_version=row["last_version"],
    )


def replace_disk(tx: Tx, namespace: str, workspace: str, restored_from: int | None) -> DiskRow:
    """The next runner gets a new disk, restored from that save (or empty)."""
    tx.conn.execute(
        "UPDATE workspaces SET disk = disk + 1, restored_from = ? WHERE namespace = ? AND name = ?",
        (restored_from, namespace, workspace),
    )
    disk = get(tx, namespace, workspace)
    assert disk is not None
    return disk


def request_save(tx: Tx, namespace: str, workspace: str, session_id: str, turn_id: str) -> SaveRow:
    """A new pending save of the Workspace's current disk, with the next version.

    Two statements, as this runs with every completed Turn: the Workspace's row
    (made if new) takes the next version and answers it with its disk, and the
    save is inserted and answered as stored."""
    disk, version = tx.conn.execute(
        "INSERT INTO workspaces (namespace, name, last_version) VALUES (?, ?, 1)"
        " ON CONFLICT (namespace, name) DO UPDATE SET last_version = workspaces.last_version + 1"
        " RETURNING disk, last_version",
        (namespace, workspace),
    ).fetchone()
    row = tx.conn.execute(
        "INSERT INTO saves (namespace, workspace, version, disk, session_id, turn_id, status,"
        " requested_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?) RETURNING *",
        (namespace, workspace, version, disk, session_id, turn_id, dump_time(tx.now)),
    ).fetchone()
    return SaveRow.load(row)


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


def pending(rt: ReadTx) -> list[SaveRow]:
    """Every pending save, oldest first."""
    return [
        SaveRow.load(row)
        for row in rt.conn.execute(
            "SELECT * FROM saves WHERE status = 'pending' ORDER BY requested_at, version"
        )
    ]


def delete_workspace(tx: Tx, namespace: str, workspace: str) -> None:
    tx.conn.execute(
        "DELETE FROM saves WHERE namespace = ? AND workspace = ?", (namespace, workspace)
    )
    tx.conn.execute(
        "DELETE FROM workspaces WHERE namespace = ? AND name = ?", (namespace, workspace)
    )
