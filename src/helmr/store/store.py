"""The async face of the timeline store, over either backend; the event loop
never waits on the database.

:meth:`Store.open` is the one place a backend is chosen: a ``postgresql://``
URL opens PostgreSQL (:mod:`.postgres`, the ``helmr[postgres]`` extra, for
several replicas on one database), anything else is a SQLite file
(:mod:`.sqlite`, the embedded default). A Store is bound to the event loop
that opened it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import JsonValue

from helmr.events import Event, EventKind, EventPage
from helmr.store import retention, timeline
from helmr.store.read_batches import ReadBatches
from helmr.store.schema import Synchronous
from helmr.store.signals import Signals, Wakeup
from helmr.store.sqlite import SqliteBackend
from helmr.store.tx import ReadTx, Tx
from helmr.store.writer import Clock

T = TypeVar("T")

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def utc_now() -> datetime:
    return datetime.now(UTC)


def is_postgres(location: str | Path) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


class Backend(Protocol):
    """Where transactions run: they commit before ``write`` returns, and the
    backend publishes the Sessions each commit touched to the Store's signals.
    ``background`` transactions may run apart from the others (see
    :meth:`Store.background`)."""

    database_errors: tuple[type[Exception], ...]
    """What its driver raises for a failed statement (see :mod:`.read_batches`)."""

    async def write(self, fn: Callable[[Tx], T], *, background: bool = False) -> T: ...
    async def read(self, fn: Callable[[ReadTx], T], *, background: bool = False) -> T: ...
    async def close(self) -> None: ...


TransactionObserver = Callable[[str, str, float], None]
"""Told each transaction's kind (``read``, ``write``), lane (``requests``,
``background``) and seconds from asked to done, queueing included."""


def _unobserved(kind: str, lane: str, seconds: float) -> None:
    return None


class Store:
    def __init__(
        self,
        backend: Backend,
        *,
        signals: Signals,
        retention: timedelta | None,
        background: bool = False,
    ) -> None:
        """Use :meth:`open`."""
        self.retention = retention
        self.observe: TransactionObserver = _unobserved
        """Told of each transaction (the operator's metrics set it)."""
        self._backend = backend
        self._signals = signals
        self._background = background
        self._reads = ReadBatches(
            partial(backend.read, background=background), backend.database_errors
        )

    @classmethod
    async def open(
        cls,
        location: str | Path,
        *,
        clock: Clock = utc_now,
        synchronous: Synchronous = "NORMAL",
        readers: int = 2,
        retention: timedelta | None = None,
    ) -> Store:
        """Opens (creating or migrating the schema if needed) the store at ``location``:
        a ``postgresql://`` URL, or a SQLite file's path.

        ``clock`` stamps every write (tests pass a fake one). ``retention``
        is the history retention period applied by :meth:`expire`; None
        keeps history forever. ``synchronous`` and ``readers`` are SQLite's
        (see :func:`helmr.store.schema.connect`).
        """
        signals = Signals()
        backend: Backend
        if is_postgres(location):
            try:  # here: psycopg is an optional extra that a SQLite install lacks
                from helmr.store.postgres import PostgresBackend
            except ImportError as exc:
                raise RuntimeError(
                    f"a PostgreSQL store needs the helmr[postgres] extra: {exc}"
                ) from exc

            backend = await PostgresBackend.open(str(location), clock=clock, signals=signals)
        else:
            backend = await SqliteBackend.open(
                str(location),
                clock=clock,
                publish=signals.publish,
                synchronous=synchronous,
                readers=readers,
            )
        return cls(backend, signals=signals, retention=retention)

    @property
    def lane(self) -> str:
        """The lane its transactions are observed in: ``requests`` or ``background``."""
        return "background" if self._background else "requests"

    def background(self) -> Store:
        """This store for work nobody waits on (the leader's reconciliation): the
        same database, Sessions and change feed, and the same ``observe``, but on
        PostgreSQL its transactions run on connections of their own, so the thousands
        of them after a restart (kopf resumes every Session) never queue the API's
        and the runners' requests behind them, nor the reverse. On SQLite, whose one
        writer commits everybody's writes together, it is the same as this store.
        Closing either closes both."""
        lane = Store(
            self._backend, signals=self._signals, retention=self.retention, background=True
        )
        # This store's observer, whenever it is set: not a copy of it as it is now.
        lane.observe = lambda kind, name, seconds: self.observe(kind, name, seconds)
        return lane

    async def close(self) -> None:
        """Commits queued writes, then closes every connection."""
        await self._backend.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Runs ``fn`` in the writer's transaction; returns once it is committed.

        If ``fn`` raises, its changes are rolled back and the error is raised
        here. Cancelling the caller does not cancel a queued write.
        """
        started = time.perf_counter()
        try:
            return await self._backend.write(fn, background=self._background)
        finally:
            self.observe("write", self.lane, time.perf_counter() - started)

    async def read(self, fn: Callable[[ReadTx], T]) -> T:
        """Runs ``fn`` on a consistent snapshot that includes every acknowledged write
        (with the other reads asked in the same turn of the event loop: see
        :mod:`.read_batches`)."""
        started = time.perf_counter()
        try:
            return await self._reads.read(fn)
        finally:
            self.observe("read", self.lane, time.perf_counter() - started)

    def turn_queued(self, session_id: str) -> bool:
        """Whether a commit of this process queued a Turn for the Session and none of
        its Turns started since: a hint, forgotten once asked (see
        :meth:`.signals.Signals.turn_queued`)."""
        return self._signals.turn_queued(session_id)

    def watching(self, session_id: str) -> Wakeup:
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
