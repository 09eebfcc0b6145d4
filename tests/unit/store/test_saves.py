"""Saves of a Workspace's disk: versions per Workspace, each of the disk it was taken of."""

from __future__ import annotations

from pathlib import Path

from helmr.store import Store, Tx, disks
from tests.compose import new_session


async def test_save_versions_count_per_workspace_and_name_its_current_disk(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store, "w1")

        def save(tx: Tx, workspace: str) -> tuple[int, int, str]:
            row, _ = disks.request_save(tx, "team", workspace, session, f"turn-{workspace}")
            return row.version, row.disk, row.status

        # The first save of a Workspace that has no row yet makes it, as version 1.
        assert await store.write(lambda tx: save(tx, "w1")) == (1, 1, "pending")
        assert await store.write(lambda tx: save(tx, "w1")) == (2, 1, "pending")
        assert await store.write(lambda tx: save(tx, "w2")) == (1, 1, "pending")
        await store.write(lambda tx: disks.replace_disk(tx, "team", "w1", 2))
        assert await store.write(lambda tx: save(tx, "w1")) == (3, 2, "pending")
        stored = await store.read(lambda rt: disks.get(rt, "team", "w1"))
        assert stored is not None
        assert (stored.last_version, stored.disk) == (3, 2)
