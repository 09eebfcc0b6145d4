"""Schema version 8: a Workspace's saves can be ``covered`` by a newer one, and a
version 7 database keeps every save it had."""

from __future__ import annotations

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
        assert [s.version for s in await store.read(disks.pending)] == [2]
    with plain(store_location) as db:
        assert db.version == SCHEMA_VERSION
