"""Sessions listed by a condition (live processes, those needing a runner...) are
read whole in the list's one statement; only where rows are locked (a write on
PostgreSQL) is each read again under its lock, as it is now."""

from __future__ import annotations

from helmr.store import ReadTx, Tx, sessions
from tests.unit.control.harness import Harness
from tests.unit.counting import CountingConnection

LIVE = 12


async def _live_sessions(h: Harness) -> list[str]:
    ids = []
    for _ in range(LIVE):
        session = await h.session()
        await h.control.process_started(session.id)
        ids.append(session.id)
    return ids


async def test_a_read_lists_live_processes_in_one_statement(h: Harness) -> None:
    ids = await _live_sessions(h)

    def listed(rt: ReadTx) -> tuple[list[str], list[str]]:
        counted = CountingConnection(rt.conn)
        rows = sessions.live(ReadTx(counted, rt.dialect, rt.now))
        return [row.id for row in rows], counted.statements

    found, statements = await h.store.read(listed)
    assert sorted(found) == sorted(ids)
    assert len(statements) == 1


async def test_a_write_that_locks_rows_reads_each_listed_session_again_under_its_lock(
    h: Harness,
) -> None:
    ids = await _live_sessions(h)

    def listed(tx: Tx) -> tuple[list[str], list[str], bool]:
        counted = CountingConnection(tx.conn)
        rows = sessions.live(Tx(counted, tx.dialect, tx.now))
        return [row.id for row in rows], counted.statements, tx.locks_rows

    found, statements, locks_rows = await h.store.write(listed)
    assert sorted(found) == sorted(ids)
    if locks_rows:  # PostgreSQL: its writers run concurrently
        assert len(statements) == 1 + LIVE
        assert all(sql.endswith("FOR UPDATE") for sql in statements[1:])
    else:  # SQLite: one writer at a time, the listed rows are as they are
        assert len(statements) == 1
