"""The async face of the timeline store; the event loop never waits on SQLite.

Writes go to the single writer thread (:mod:`helmr.store.writer`); reads
run on a small pool of reader threads, each with its own connection, as
snapshot transactions beside the writer (WAL). A Store is bound to the
event loop that opened it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from pydantic import JsonValue

from helmr.events import Event, EventKind, EventPage
from helmr.store import retention, timeline
from helmr.store.schema import Synchronous, connect, migrate
from helmr.store.signals import Signals
from helmr.store.tx import ReadTx, Tx
from helmr.store.writer import Clock, Writer

T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


class Store:
    def __init__(
        self,
        path: str | Path,
        *,
        writer: Writer,
        writer_conn: sqlite3.Connection,
        signals: Signals,
        synchronous: Synchronous,
        readers: int,
        retention: timedelta | None,
    ) -> None:
        """Use :meth:`open`."""
        self.path = str(path)
        self.retention = retention
        self._writer = writer
        self._writer_conn = writer_conn
        self._signals = signals
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
        path: str | Path,
        *,
        clock: Clock = utc_now,
        synchronous: Synchronous = "NORMAL",
        readers: int = 2,
        retention: timedelta | None = None,
    ) -> Store:
        """Opens (creating if new) the store at ``path``.

        ``clock`` stamps every write (tests pass a fake one). ``retention``
        is the history retention period applied by :meth:`expire`; None
        keeps history forever. ``synchronous``: see :func:`helmr.store.schema.connect`.
        """
        conn = await asyncio.to_thread(_open_writer, str(path), synchronous)
        signals = Signals()
        writer = Writer(conn, clock=clock, loop=asyncio.get_running_loop(), publish=signals.publish)
        return cls(
            path,
            writer=writer,
            writer_conn=conn,
            signals=signals,
            synchronous=synchronous,
            readers=readers,
            retention=retention,
        )

    async def close(self) -> None:
        """Commits queued writes, then closes every connection."""
        await asyncio.to_thread(self._writer.stop)
        await asyncio.to_thread(self._readers.shutdown, wait=True)
        for conn in [*self._reader_conns, self._writer_conn]:
            conn.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Runs ``fn`` in the writer's transaction; returns once it is committed.

        If ``fn`` raises, its changes are rolled back and the error is raised
        here. Cancelling the caller does not cancel a queued write.
        """
        return await self._writer.submit(fn)

    async def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Runs ``fn`` on a consistent snapshot that includes every acknowledged write."""
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read, fn)

    def watching(self, session_id: str) -> AbstractContextManager[asyncio.Event]:
        """``with store.watching(sid) as signal``: set by the next commit that touches
        the Session (see :mod:`.signals` for the order of watch and read)."""
        return self._signals.watching(session_id)

    async def changed_sessions(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """The change feed: Sessions touched by commits since the previous call
        (one consumer), waiting up to ``timeout`` seconds for the first."""
        return await self._signals.changed(timeout)

    async def append_event(
        self,
        session_id: str,
        kind: EventKind,
        data: JsonValue,
        *,
        turn_id: str | None = None,
        event_id: str | None = None,
        process_epoch: int | None = None,
    ) -> Event:
        """Appends one event on its own (see :func:`helmr.store.timeline.append`)."""
        return await self.write(
            lambda tx: timeline.append(
                tx,
                session_id,
                kind,
                data,
                turn_id=turn_id,
                event_id=event_id,
                process_epoch=process_epoch,
            )
        )

    async def page(self, session_id: str, after: int = 0, limit: int = 100) -> EventPage:
        timeline.check_page(after, limit)
        return await self.read(lambda rt: timeline.page(rt, session_id, after, limit))

    async def expire(self, now: datetime) -> retention.Expired:
        """Applies the retention period as of ``now``, one Session per transaction.

        Per Session keeps each transaction short, so appends are not held up
        behind a large expiry.
        """
        if self.retention is None:
            return retention.Expired()
        cutoff = now - self.retention
        total = retention.Expired()
        for session_id in await self.read(lambda rt: retention.sessions_to_expire(rt, cutoff)):
            total += await self.write(
                partial(retention.expire_session, session_id=session_id, cutoff=cutoff)
            )
        return total

    def _open_reader(self) -> None:
        conn = connect(self.path, synchronous=self._synchronous, read_only=True)
        self._local.conn = conn
        with self._reader_lock:
            self._reader_conns.append(conn)

    def _read(self, fn: Callable[[ReadTx], T]) -> T:
        conn: sqlite3.Connection = self._local.conn
        conn.execute("BEGIN")
        try:
            return fn(ReadTx(conn))
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
