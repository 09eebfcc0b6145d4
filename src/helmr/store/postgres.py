"""The PostgreSQL backend: the same transaction functions, on a server that
several control-plane replicas share.

Why psycopg 3 with a thread pool rather than asyncpg: the transaction
functions are synchronous (``fn(tx)`` over ``tx.conn.execute``), one set of
code for both backends; psycopg's sync connections run them unchanged in
worker threads, as SQLite's do, where asyncpg would need every function
rewritten as a coroutine or a second copy. ``benchmarks/bench_store.py``
measures both backends (no-op transactions/s, appends/s, page latency).

Each write is one transaction on a pooled connection (``READ COMMITTED``):
what it reads of a Session it reads under that Session's row lock
(``Tx.lock``), so writes to one Session, from any replica, are serialized
and its sequences committed in order without gaps; a write PostgreSQL
aborts as a deadlock or serialization failure, or whose connection broke
before its commit was sent, is run again. When the server cannot be reached
(restarting, unreachable, out of connections) a transaction waits up to
``CONNECT_WAIT`` for a connection, then fails as ``Unavailable`` (the API's
503 with Retry-After): never a bare 500 for an outage. Reads are ``REPEATABLE READ``
snapshots. Commits announce the Sessions they touched with ``NOTIFY``
(:mod:`.postgres_feed`), so every replica's waiters wake.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg import errors, pq
from psycopg.rows import RowMaker
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from helmr.errors import Unavailable
from helmr.store import mirror_cursors, schema
from helmr.store.dialect import POSTGRES
from helmr.store.postgres_feed import Feed, commit
from helmr.store.signals import Signals
from helmr.store.tx import ReadTx, Tx
from helmr.store.writer import Clock

T = TypeVar("T")
R = TypeVar("R")

CONNECTIONS = 8
"""Pooled connections, and threads running transactions on them, for the
transactions callers wait on (the API's and the runners' requests)."""
BACKGROUND_CONNECTIONS = 4
"""More, with threads of their own, for background transactions (the leader's
reconciliation, :meth:`helmr.store.Store.background`). Measured at 5,000 Sessions
with one FIFO of 8: after a restart, kopf's resume of every Session queued the
API's first write 33 s (docs/sizing.md). Each thread holds at most one connection
at a time, so neither kind ever waits for a connection the other holds."""
ATTEMPTS = 5
"""Runs of one transaction that PostgreSQL aborted for a conflict (then an error)."""
CONNECT_WAIT = 5.0
"""Seconds a transaction waits for a connection while the server cannot be
reached: a fast restart (about a second) is ridden through, a longer outage
answers ``Unavailable`` rather than holding the caller (psycopg's default is 30)."""
# psycopg_pool retries a connection that failed after 1 s, doubling the wait each
# time (1, 2, 4, 8 s...): measured under two replicas, the API acknowledged its
# first write 14 s after a crash that kept the server down 10 s, and 6.7 s after
# a restart of 0.7 s. Retried each second (with psycopg_pool's jitter), the
# store is back about a second after the server is; a server that is down costs
# each replica a connection attempt per pooled connection a second. A class
# setting of psycopg_pool's (it has no parameter for it): if a version drops it,
# this changes nothing.
AttemptWithBackoff.DELAY_BACKOFF = 1.0

_OUTAGE_CLASSES = ("08", "53", "57P")
"""SQLSTATE prefixes of a server that cannot serve now: connection exceptions,
insufficient resources (too many connections), shutting down or starting up."""
_MIGRATION_LOCK = 0x68656C6D72
"""The advisory lock replicas starting together take to migrate one at a time."""


class PgRow(tuple[Any, ...]):
    """A row read by position or by column name, as ``sqlite3.Row`` is."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}
    _names: ClassVar[tuple[str, ...]] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            key = self._index[key]
        return tuple.__getitem__(self, key)

    def keys(self) -> tuple[str, ...]:
        """The column names, in order (``sqlite3.Row.keys``)."""
        return self._names


@lru_cache(maxsize=512)
def _row_class(names: tuple[bytes, ...]) -> type[PgRow]:
    decoded = tuple(name.decode() for name in names)
    index = {name: position for position, name in enumerate(decoded)}
    return type("PgRow", (PgRow,), {"__slots__": (), "_index": index, "_names": decoded})


def _rows(cursor: Any) -> RowMaker[PgRow]:  # psycopg's BaseCursor is not exported
    # The column names straight from the result: ``cursor.description`` builds a
    # Column object per column, 75 us for a Session's 38 on every statement that
    # reads one, where this is 3 (docs/sizing.md, "CPU per Turn, cut by profile").
    result = cursor.pgresult
    names = () if result is None else tuple(map(result.fname, range(result.nfields)))
    return _row_class(names)


class PgConnection:
    """A psycopg connection with the store's ``execute``: SQLite's placeholders."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[PgRow]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[PgRow]:
        return self._conn.execute(POSTGRES.statement(sql), parameters)


class PostgresBackend:
    database_errors: tuple[type[Exception], ...] = (psycopg.Error,)

    def __init__(
        self, pool: ConnectionPool[psycopg.Connection[PgRow]], *, clock: Clock, signals: Signals
    ) -> None:
        """Use :meth:`open`."""
        self._pool = pool
        self._clock = clock
        self._signals = signals
        self._threads = ThreadPoolExecutor(CONNECTIONS, thread_name_prefix="helmr-store-pg")
        self._background = ThreadPoolExecutor(
            BACKGROUND_CONNECTIONS, thread_name_prefix="helmr-store-pg-background"
        )
        self._loop = asyncio.get_running_loop()
        self._origin = uuid.uuid4().hex
        self._feed: Feed | None = None

    @classmethod
    async def open(cls, url: str, *, clock: Clock, signals: Signals) -> PostgresBackend:
        pool: ConnectionPool[psycopg.Connection[PgRow]] = ConnectionPool(
            url,
            connection_class=psycopg.Connection[PgRow],
            kwargs={"autocommit": True, "row_factory": _rows},
            min_size=CONNECTIONS + BACKGROUND_CONNECTIONS,
            max_size=CONNECTIONS + BACKGROUND_CONNECTIONS,
            timeout=CONNECT_WAIT,
            open=False,
            name="helmr-store",
        )
        backend = cls(pool, clock=clock, signals=signals)
        try:
            await asyncio.to_thread(pool.open, wait=True)
            await asyncio.to_thread(_migrate, pool)
            backend._feed = await Feed.start(
                url, backend._origin, signals, lambda: backend.read(mirror_cursors.behind)
            )
        except BaseException:
            await backend.close()
            raise
        return backend

    # A transaction runs on a store thread, which hands the event loop its answer
    # with one call: the result, and a write's wake-ups before it. Not a
    # concurrent future wrapped for the loop, plus a call for the wake-ups: each
    # call from a thread wakes the loop through its self-pipe, and wrapping chains
    # two futures with their callbacks. The thread runs the transaction whatever
    # becomes of the caller: a caller that stops waiting does not cancel its write.

    async def write(self, fn: Callable[[Tx], T], *, background: bool = False) -> T:
        future: asyncio.Future[T] = self._loop.create_future()
        self._lane(background).submit(self._in_thread, self._write, fn, future)
        return await future

    async def read(self, fn: Callable[[ReadTx], T], *, background: bool = False) -> T:
        future: asyncio.Future[T] = self._loop.create_future()
        self._lane(background).submit(self._in_thread, self._read, fn, future)
        return await future

    def _in_thread(
        self,
        run: Callable[[Callable[[Any], T]], tuple[T, Tx | None]],
        fn: Callable[[Any], T],
        future: asyncio.Future[T],
    ) -> None:
        """Runs ``run(fn)`` (:meth:`_retried`) on a store thread, and answers the loop."""
        try:
            value, tx = self._retried(run, fn)
        except BaseException as exc:
            self._loop.call_soon_threadsafe(_fail, future, exc)
        else:
            self._loop.call_soon_threadsafe(self._answer, future, value, tx)

    def _answer(self, future: asyncio.Future[T], value: T, tx: Tx | None) -> None:
        """On the loop: a write's Sessions woken, then its caller answered."""
        if tx is not None:
            self._signals.publish(tx.touched, tx.queues)
        if not future.done():  # else the caller stopped waiting: the write stands
            future.set_result(value)

    def _lane(self, background: bool) -> ThreadPoolExecutor:
        return self._background if background else self._threads

    async def close(self) -> None:
        """Lets running transactions finish, then closes every connection (the
        feed's first: reconnecting, it would read through the threads)."""
        if self._feed is not None:
            await self._feed.stop()
        for lane in (self._threads, self._background):
            await asyncio.to_thread(lane.shutdown, wait=True)
        await asyncio.to_thread(self._pool.close)

    def _retried(self, run: Callable[[Callable[[Any], T]], R], fn: Callable[[Any], T]) -> R:
        """``run(fn)``, again when that is safe: a transaction PostgreSQL aborted for
        a conflict, or one whose connection broke before its commit was sent (a
        new connection from the pool runs it). A server that cannot be reached,
        or a connection lost at the commit (which may have landed: not run
        again), is ``Unavailable``."""
        try:
            return self._attempts(run, fn)
        except psycopg.OperationalError as exc:
            if not _outage(exc):
                raise
            raise Unavailable(f"the store cannot be reached now ({exc}); retry later") from exc

    def _attempts(self, run: Callable[[Callable[[Any], T]], R], fn: Callable[[Any], T]) -> R:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return run(fn)
            except (errors.SerializationFailure, errors.DeadlockDetected):
                if attempt == ATTEMPTS:
                    raise
            except _Lost as lost:
                if attempt == ATTEMPTS:
                    raise lost.error from None
                # After a server restart every pooled connection is dead: find them
                # all now rather than one per attempt.
                self._pool.check()
        raise AssertionError("unreachable")

    def _write(self, fn: Callable[[Tx], T]) -> tuple[T, Tx]:
        """``fn`` committed, and its transaction (whose Sessions the loop wakes)."""
        with self._pool.connection() as conn:
            tx = Tx(PgConnection(conn), POSTGRES, self._clock())
            try:
                _command(conn, "BEGIN")
                value = fn(tx)
            except BaseException as exc:
                _end(conn, exc)
                raise
            # Not retried if the connection breaks now: the commit may have landed.
            _command(conn, commit(self._origin, tx.touched))
        return value, tx

    def _read(self, fn: Callable[[ReadTx], T]) -> tuple[T, None]:
        with self._pool.connection() as conn:
            try:
                _command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                value = fn(ReadTx(PgConnection(conn), POSTGRES, self._clock()))
            except BaseException as exc:
                _end(conn, exc)
                raise
            _command(conn, "ROLLBACK")
        return value, None


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    """On the loop: a transaction's caller gets its error, unless it stopped waiting."""
    if not future.done():
        future.set_exception(error)


def _outage(error: psycopg.OperationalError) -> bool:
    """Whether ``error`` says the server cannot be reached or cannot serve now,
    rather than that the statement is wrong: no connection from the pool in
    time, a connection lost (no SQLSTATE: the client saw it), or the server's
    own word."""
    if isinstance(error, PoolTimeout) or error.sqlstate is None:
        return True
    return error.sqlstate.startswith(_OUTAGE_CLASSES)


class _Lost(Exception):
    """The connection broke mid-transaction: nothing of it was committed."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _end(conn: psycopg.Connection[PgRow], error: BaseException) -> None:
    """Ends a transaction that raised ``error``: rolled back, or lost with its connection."""
    if conn.broken:
        raise _Lost(error) from error
    _command(conn, "ROLLBACK")


def _command(conn: psycopg.Connection[Any], command: str) -> None:
    """Runs ``command``, transaction control without parameters or rows, through
    libpq at once (blocking this store thread, as psycopg's ``execute`` does, the
    GIL released): ``execute`` made a cursor for it and ran the query's conversion,
    its preparation's bookkeeping and its result's handling in Python, about half
    the CPU of a ``BEGIN`` (docs/sizing.md, issue 31). Its errors are psycopg's: a
    lost connection an ``OperationalError`` without SQLSTATE, as ``execute`` raises it
    (:func:`_outage`, :class:`_Lost`), else the server's error's class."""
    encoding = conn.info.encoding
    result = conn.pgconn.exec_(command.encode(encoding))
    if result.status == pq.ExecStatus.COMMAND_OK:
        return
    if conn.broken:
        raise psycopg.OperationalError(pq.error_message(result, encoding=encoding))
    raise errors.error_from_result(result, encoding=encoding)


def _migrate(pool: ConnectionPool[psycopg.Connection[PgRow]]) -> None:
    """Creates the schema in a new database, or brings an older one up to date, in
    one transaction; the schema's version is the one row of ``schema_version``."""
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        version = 0 if row is None else int(row[0])
        if version == schema.SCHEMA_VERSION:
            return
        for script in schema.scripts(version):
            for statement in schema.statements(script):
                conn.execute(POSTGRES.ddl(statement))
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version VALUES (%s)", (schema.SCHEMA_VERSION,))
