"""The SQLite backend: one file, one writer thread, reader threads beside it.

Writes go to the single writer thread (:mod:`helmr.store.writer`); reads run
on a small pool of reader threads, each with its own connection, as snapshot
transactions beside the writer (WAL). The event loop never waits on SQLite.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from helmr.store.dialect import SQLITE
from helmr.store.schema import Synchronous, connect, migrate
from helmr.store.tx import ReadTx, Tx
from helmr.store.writer import Clock, Writer

T = TypeVar("T")


class SqliteBackend:
    database_errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(
        self,
        path: str,
        *,
        writer: Writer,
        writer_conn: sqlite3.Connection,
        clock: Clock,
        synchronous: Synchronous,
        readers: int,
    ) -> None:
        """Use :meth:`open`."""
        self._path = path
        self._clock = clock
        self._writer = writer
        self._writer_conn = writer_conn
        self._synchronous = synchronous
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self._readers = ThreadPoolExecutor(
            max_workers=readers,
            thread_name_prefix="helmr-store-read",
            initializer=self._open_reader,
        )

    @classmethod
    async def open(
        cls,
        path: str,
        *,
        clock: Clock,
        publish: Callable[[Iterable[str], Mapping[str, bool]], None],
        synchronous: Synchronous,
        readers: int,
    ) -> SqliteBackend:
        conn = await asyncio.to_thread(_open_writer, path, synchronous)
        writer = Writer(conn, clock=clock, loop=asyncio.get_running_loop(), publish=publish)
        return cls(
            path,
            writer=writer,
            writer_conn=conn,
            clock=clock,
            synchronous=synchronous,
            readers=readers,
        )

    # ``background`` changes nothing here: the one writer commits every caller's
    # writes together, and reads are short snapshots on the reader threads.
    async def write(self, fn: Callable[[Tx], T], *, background: bool = False) -> T:
        return await self._writer.submit(fn)

    async def read(self, fn: Callable[[ReadTx], T], *, background: bool = False) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read, fn)

    async def close(self) -> None:
        await asyncio.to_thread(self._writer.stop)
        await asyncio.to_thread(self._readers.shutdown, wait=True)
        for conn in [*self._reader_conns, self._writer_conn]:
            conn.close()

    def _open_reader(self) -> None:
        conn = connect(self._path, synchronous=self._synchronous, read_only=True)
        self._local.conn = conn
        with self._reader_lock:
            self._reader_conns.append(conn)

    def _read(self, fn: Callable[[ReadTx], T]) -> T:
        conn: sqlite3.Connection = self._local.conn
        conn.execute("BEGIN")
        try:
            return fn(ReadTx(conn, SQLITE, self._clock()))
        finally:
            conn.execute("ROLLBACK")


def _open_writer(path: str, synchronous: Synchronous) -> sqlite3.Connection:
    conn = connect(path, synchronous=synchronous, read_only=False)
    try:
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn
