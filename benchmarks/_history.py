"""A long history for ``bench_scale.py``: completed Turns written into a store through
its Control, spread over open Sessions, as if each Session's runner had completed
them.

Into PostgreSQL the Turns are written on a scratch SQLite copy of the database,
and the copy's rows are then written back. The rows are the same: both backends
run one set of transaction code over one schema (``helmr.store.dialect``), whose
columns are text, 64-bit integers and doubles, which both keep exactly
(``tests/unit/test_bench_history.py``). Through a PostgreSQL store each Turn is
three transactions of many statements, each a round trip; the server's backends
were mostly idle in transaction, waiting for the next statement from a busy
client (``pg_stat_activity``), and seldom on fsync: 70 Turns/s
durable, 80 to 95 with the seeding connection's ``synchronous_commit`` off, and
no faster from 4 processes (2 cores, load average 9 to 15). Through SQLite and
back: 256 Turns/s (100 Sessions, 1,000 Turns) and 209 (1,000 Sessions, 10,000
Turns), the copies included.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.rows import TupleRow
from tests.compose import Plane, open_plane

from helmr.control.control import Control
from helmr.store import Tx
from helmr.store.codec import dump_time
from helmr.store.store import POSTGRES_SCHEMES

NOT_COPIED = ("schema_version",)
"""PostgreSQL's record of the schema's version (SQLite keeps it in a pragma): the
scratch copy is migrated to the same version by opening it."""


async def seed_history(store: str, epochs: dict[str, int], turns: int) -> None:
    """``turns`` completed Turns over the Sessions of ``epochs`` (id -> the epoch of
    its running process) in the store at ``store`` (a SQLite file or a PostgreSQL
    URL), then marked as mirrored. Nothing else may use the store meanwhile."""
    if not store.startswith(POSTGRES_SCHEMES):
        async with open_plane(store) as plane:
            await _seed(plane, epochs, turns)
        return
    with _scratch() as scratch:
        async with open_plane(scratch):
            pass  # the schema, migrated as PostgreSQL's is
        await asyncio.to_thread(_to_sqlite, store, scratch)
        async with open_plane(scratch) as plane:
            await _seed(plane, epochs, turns)
        await asyncio.to_thread(_to_postgres, scratch, store)


async def _seed(plane: Plane, epochs: dict[str, int], turns: int) -> None:
    await plane.store.write(_disks_saved_now)
    control = plane.control
    ids = list(epochs)
    sessions = len(ids)
    per_session = [turns // sessions + (i < turns % sessions) for i in range(sessions)]
    # A few Sessions at a time: the writer's commits are what this costs.
    batch = 32
    for start in range(0, sessions, batch):
        await asyncio.gather(
            *(
                _history(control, ids[i], epochs[ids[i]], per_session[i])
                for i in range(start, min(start + batch, sessions))
            )
        )
    # As if a status mirror had followed the history while it was made: its
    # first pass then reads only what is new (not the whole seeded history).
    await control.save_mirrored_through(
        {session_id: await _last_event(control, session_id) for session_id in ids}
    )


def _disks_saved_now(tx: Tx) -> None:
    """As if each Workspace's disk had been saved as the history began: a Workspace
    whose save policy is at most one save per N seconds (the kwok benchmark's Actor
    says a day) then asks for none for its seeded Turns. Otherwise the first Turn's
    end asks for a save, the next Turn waits for it to be cut (Turn-aligned saves),
    and nothing cuts it: the control plane is stopped while the history is written."""
    tx.conn.execute("UPDATE workspaces SET last_cut_at = ?", (dump_time(tx.now),))


async def _last_event(control: Control, session_id: str) -> int:
    after = 0
    while True:
        page = await control.list_events(session_id, after, 1000)
        after = page.next_after
        if not page.has_more:
            return after


async def _history(control: Control, session_id: str, epoch: int, turns: int) -> None:
    for n in range(turns):
        await control.enqueue(session_id, {"history": n})
        turn = await control.receive(session_id, epoch, timeout=0)
        assert turn is not None
        await control.complete(session_id, epoch, turn.id)


# --- PostgreSQL <-> a scratch SQLite file -------------------------------------------------


@contextmanager
def _scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="helmr-seed-") as directory:
        yield str(Path(directory) / "helmr.db")


def _tables(pg: psycopg.Connection[TupleRow]) -> dict[str, list[str]]:
    """The store's tables in PostgreSQL, each with its columns in order."""
    rows = pg.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    ).fetchall()
    tables: dict[str, list[str]] = {}
    for table, column in rows:
        if table not in NOT_COPIED:
            tables.setdefault(str(table), []).append(str(column))
    return tables


def _to_sqlite(url: str, path: str) -> None:
    """Every row of the PostgreSQL database at ``url`` into the (migrated, empty)
    SQLite file at ``path``."""
    with psycopg.connect(url) as pg, sqlite3.connect(path) as lite:
        for table, columns in _tables(pg).items():
            names = ", ".join(columns)
            rows = pg.execute(f"SELECT {names} FROM {table}").fetchall()
            lite.execute(f"DELETE FROM {table}")
            marks = ", ".join("?" * len(columns))
            lite.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


def _to_postgres(path: str, url: str) -> None:
    """The PostgreSQL database at ``url`` made to hold exactly the rows of the SQLite
    file at ``path``: one transaction."""
    with psycopg.connect(url) as pg, sqlite3.connect(path) as lite:
        tables = _tables(pg)
        pg.execute(f"TRUNCATE {', '.join(tables)}")
        for table, columns in tables.items():
            names = ", ".join(columns)
            with pg.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in lite.execute(f"SELECT {names} FROM {table}"):
                    copy.write_row(row)
