"""Schema version 8: a Workspace's saves can be ``covered`` by a newer one, and a
version 7 database keeps every save it had."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from helmr.store import Store, disks
from helmr.store.schema import SCHEMA_VERSION
from tests.compose import new_session
from tests.unit.store.raw import plain

# The saves table as version 7 had it: no ``covered`` status, no ``covered_by``.
_VERSION_7_SAVES = [
    "ALTER TABLE saves RENAME TO saves_v8",
    """CREATE TABLE saves (
        namespace TEXT NOT NULL, workspace TEXT NOT NULL, version INTEGER NOT NULL,
        disk INTEGER NOT NULL, session_id TEXT NOT NULL, turn_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'ready', 'failed', 'lost', 'pruned')),
        attempts INTEGER NOT NULL DEFAULT 0, error TEXT, requested_at TEXT NOT NULL,
        ready_at TEXT, PRIMARY KEY (namespace, workspace, version))""",
    "INSERT INTO saves SELECT namespace, workspace, version, disk, session_id, turn_id,"
    " status, attempts, error, requested_at, ready_at FROM saves_v8",
    "DROP TABLE saves_v8",
]


async def test_a_version_7_database_keeps_its_saves_and_can_cover_them(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store)
        await store.write(lambda tx: disks.request_save(tx, "team", "w", session, "t1"))
        await store.write(lambda tx: disks.request_save(tx, "team", "w", session, "t2"))
    with plain(store_location) as db:
        for statement in _VERSION_7_SAVES:
            db.execute(statement)
        db.drop_version_9(saves=False)  # the saves table above has none of its columns
        db.version = 7

    async with await Store.open(store_location) as store:
        kept = await store.read(lambda rt: disks.saves(rt, "team", "w"))
        assert [(s.version, s.turn_id, s.status, s.covered_by) for s in kept] == [
            (2, "t2", "pending", None),
            (1, "t1", "pending", None),
        ]
        await store.write(lambda tx: disks.update_save(tx, kept[1], status="covered", covered_by=2))
        [covered] = await store.read(lambda rt: disks.covered_by(rt, "team", "w", 2))
        assert (covered.version, covered.status) == (1, "covered")
        assert [s.version for s in await store.read(disks.to_step)] == [2]
    with plain(store_location) as db:
        assert db.version == SCHEMA_VERSION


async def test_a_version_10_database_keeps_its_last_save_time_as_its_last_cut(
    store_location: str | Path,
) -> None:
    """Schema version 11 counts the save policy's interval from the last cut: a
    version 10 database's last save taken is where its interval counts from."""
    async with await Store.open(store_location) as store:
        await store.write(lambda tx: disks.ensure(tx, "team", "w"))
    with plain(store_location) as db:
        db.drop_version_11()
        db.execute("UPDATE workspaces SET last_taken_at = '2026-12-04T05:00:00.000000+00:00'")
        db.version = 10

    async with await Store.open(store_location) as store:
        disk = await store.read(lambda rt: disks.require(rt, "team", "w"))
        assert disk.last_cut_at == datetime(2026, 12, 4, 5, tzinfo=UTC)
    with plain(store_location) as db:
        assert db.version == SCHEMA_VERSION
