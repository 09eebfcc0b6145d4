"""Saves of a Workspace's disk: versions per Workspace, each of the disk it was taken of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from helmr.store import Store, Tx, disks, sessions
from tests.compose import new_session
from tests.unit.counting import CountingConnection

HOUR = timedelta(hours=1)


async def test_save_versions_count_per_workspace_and_name_its_current_disk(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store, "w1")

        def save(tx: Tx, workspace: str) -> tuple[int, int, str]:
            version, _ = disks.request_save(tx, "team", workspace, session, f"turn-{workspace}")
            [saved] = [s for s in disks.saves(tx, "team", workspace) if s.version == version]
            return saved.version, saved.disk, saved.status

        # The first save of a Workspace that has no row yet makes it, as version 1.
        assert await store.write(lambda tx: save(tx, "w1")) == (1, 1, "pending")
        assert await store.write(lambda tx: save(tx, "w1")) == (2, 1, "pending")
        assert await store.write(lambda tx: save(tx, "w2")) == (1, 1, "pending")
        await store.write(lambda tx: disks.replace_disk(tx, "team", "w1", 2))
        assert await store.write(lambda tx: save(tx, "w1")) == (3, 2, "pending")
        stored = await store.read(lambda rt: disks.get(rt, "team", "w1"))
        assert stored is not None
        assert (stored.last_version, stored.disk) == (3, 2)


async def test_a_save_is_requested_in_one_statement_where_a_with_may_update(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store, "w")

        def request(tx: Tx, turn_id: str) -> tuple[int, bool, list[str]]:
            counted = CountingConnection(tx.conn)
            version, cut_now = disks.request_save(
                Tx(counted, tx.dialect, tx.now), "team", "w", session, turn_id
            )
            return version, cut_now, counted.statements

        # Saves not cut at Turns' ends: none is cut now.
        version, cut_now, statements = await store.write(lambda tx: request(tx, "t1"))
        dialect = await store.read(lambda rt: rt.dialect)
        # SQLite takes the version and inserts in two (in process, no round trip to save).
        assert len(statements) == (1 if dialect.updates_in_with else 2), statements
        assert (version, cut_now) == (1, False)
        # Cut at Turns' ends, none being taken: cut now.
        await store.write(lambda tx: disks.set_policy(tx, "team", "w", aligned=True, interval=HOUR))
        assert (await store.write(lambda tx: request(tx, "t2")))[:2] == (2, True)
        # Being taken: covered by the next save cut instead.
        await store.write(lambda tx: disks.set_taking(tx, "team", "w", 2))
        assert (await store.write(lambda tx: request(tx, "t3")))[:2] == (3, False)
        # Cut within its save policy's interval: not due.
        await store.write(lambda tx: disks.set_taking(tx, "team", "w", None))
        await store.write(lambda tx: disks.set_cut(tx, "team", "w"))
        assert (await store.write(lambda tx: request(tx, "t4")))[:2] == (4, False)
        saves = await store.read(lambda rt: disks.saves(rt, "team", "w"))
        assert sorted((s.version, s.turn_id, s.status) for s in saves) == [
            (n, f"t{n}", "pending") for n in range(1, 5)
        ]


async def test_a_keeper_reads_a_workspaces_newest_save_only_once_it_is_due(
    store_location: str | Path,
) -> None:
    """Under a save policy of one save per interval, the newest pending save is left
    out until its take would not be refused (``take_due``): its interval passed since
    the last cut, its Session waits for its cut, or its Session's process is gone.
    A save taken is read whatever the policy (its snapshot to follow), and so is the
    newest of a Workspace whose saves are not cut at Turns' ends."""
    async with await Store.open(store_location) as store:
        session = await new_session(store, "w")
        await new_session(store, "free")
        prepare_by = datetime.now(UTC)
        await store.write(lambda tx: sessions.process_started(tx, session, 1, prepare_by))
        await store.write(lambda tx: disks.set_policy(tx, "team", "w", aligned=True, interval=HOUR))
        await store.write(lambda tx: disks.set_cut(tx, "team", "w"))
        for workspace in ("w", "w", "free"):
            await _request_save(store, workspace, session)

        async def stepped() -> list[tuple[str, int]]:
            return [(s.workspace, s.version) for s in await store.read(disks.to_step)]

        assert await stepped() == [("free", 1)]  # not due, though its Session is live
        await store.write(lambda tx: sessions.await_cut(tx, session, 2))
        assert await stepped() == [("w", 2), ("free", 1)]
        await store.write(lambda tx: sessions.await_cut(tx, session, 1))  # another's cut
        assert await stepped() == [("free", 1)]
        taken = await store.read(lambda rt: disks.require_save(rt, "team", "w", 1))
        await store.write(lambda tx: disks.update_save(tx, taken, taken_at=tx.now))
        assert await stepped() == [("w", 1), ("free", 1)]  # taken: its snapshot followed
        await store.write(lambda tx: sessions.process_ended(tx, session))
        assert await stepped() == [("w", 1), ("w", 2), ("free", 1)]
        woken = await store.read(lambda rt: disks.to_step(rt, {session}))
        assert [(s.workspace, s.version) for s in woken] == [("w", 1), ("w", 2)]

        await store.write(lambda tx: sessions.process_started(tx, session, 2, prepare_by))
        assert await stepped() == [("w", 1), ("free", 1)]
        await store.write(
            lambda tx: disks.set_policy(tx, "team", "w", aligned=True, interval=timedelta())
        )
        assert await stepped() == [("w", 1), ("w", 2), ("free", 1)]  # the interval passed


async def _request_save(store: Store, workspace: str, session_id: str) -> None:
    await store.write(
        partial(
            disks.request_save,
            namespace="team",
            workspace=workspace,
            session_id=session_id,
            turn_id="turn",
        )
    )


async def test_a_keeper_reads_of_each_workspace_its_newest_pending_save_and_those_taken(
    store_location: str | Path,
) -> None:
    async with await Store.open(store_location) as store:
        session = await new_session(store, "w1")

        for workspace in ("w1", "w1", "w2", "w1", "w1", "w2", "w1"):
            await _request_save(store, workspace, session)
        # w1's save 2 was taken (its snapshot to follow), and its attempt failed: it
        # stays pending, marked taken; its saves 1, 3 and 4 were never taken.
        taken = await store.read(lambda rt: disks.require_save(rt, "team", "w1", 2))
        await store.write(lambda tx: disks.update_save(tx, taken, taken_at=tx.now))

        stepped = await store.read(disks.to_step)
        assert [(s.workspace, s.version) for s in stepped] == [("w1", 2), ("w2", 2), ("w1", 5)]
        counts = await store.read(
            lambda rt: [disks.count(rt, "team", w, "pending") for w in ("w1", "w2", "w3")]
        )
        assert counts == [5, 2, 0]


async def test_a_keeper_woken_by_sessions_reads_only_their_workspaces_saves(
    store_location: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a wake reads: of the Workspaces the named Sessions use, what a pass reads
    of them, each save once though two Sessions use its Workspace, and in the same
    order whether the Sessions are read at once or in several reads."""
    async with await Store.open(store_location) as store:
        w1, w2, w3 = [await new_session(store, name) for name in ("w1", "w2", "w3")]
        await store.write(lambda tx: sessions.closed(tx, w1))  # w1 is then another's
        again = await store.write(
            lambda tx: sessions.insert(
                tx,
                namespace="team",
                name="w1-again",
                actor="a",
                workspace="w1",
                key=None,
                idempotency_key=None,
            )
        )
        for workspace, session in (("w1", w1), ("w2", w2), ("w1", w1), ("w3", w3), ("w2", w2)):
            await _request_save(store, workspace, session)
        everything = await store.read(disks.to_step)
        assert [(s.workspace, s.version) for s in everything] == [("w1", 2), ("w3", 1), ("w2", 2)]
        woken = await store.read(lambda rt: disks.to_step(rt, {w2, w1}))
        assert woken == [s for s in everything if s.workspace in ("w1", "w2")]
        assert await store.read(lambda rt: disks.to_step(rt, set())) == []
        assert await store.read(lambda rt: disks.to_step(rt, {"no-such-session"})) == []
        monkeypatch.setattr(disks, "SESSIONS_AT_ONCE", 1)  # a read per Session
        assert await store.read(lambda rt: disks.to_step(rt, {w3, w2, w1, again.id})) == everything
