"""The change feed across replicas: ``NOTIFY`` in each commit, ``LISTEN`` on the loop.

A write transaction that touched Sessions sends their ids on one channel
with its ``COMMIT``; PostgreSQL delivers a notification only if, and once, its
transaction commits. Each replica's :class:`Feed` listens on its own
connection (psycopg's async one: the event loop never blocks on it) and
publishes other replicas' ids to its Store's signals: waiters, long polls and
the status mirror wake whichever replica committed. A replica publishes its
own commits directly (before its write returns), so it skips their echo.

PostgreSQL sends every listener every notification, this replica's own too
(three a no-op Turn), so the Feed reads them as cheaply as it can: one reader
callback on the connection's socket takes whatever arrived from libpq and drops
its own by their origin. psycopg's ``notifies()`` paid a reader added and
removed, a future, a timer and a lock for each (12% of the event loop's CPU per
Turn), and woke ten times a second when idle.

Notifications sent while a Feed is disconnected are lost (a server restart:
another replica's pool is back before this Feed listens again): on
reconnecting it wakes every waiter, which reads again, and publishes the
Sessions that ``missed`` names (the status mirror's backlog), so the leader's
mirror and supervisor hear of them too, not only at their next change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from helmr.errors import Unavailable
from helmr.store.signals import Signals

log = logging.getLogger(__name__)

CHANNEL = "helmr_sessions"
_PAYLOAD_MAX = 7900
"""Bytes of one notification's payload (PostgreSQL's limit is 8000)."""
RECONNECT_DELAY = 1.0


def commit(origin: str, session_ids: Iterable[str]) -> str:
    """``COMMIT``, after a ``NOTIFY`` of the Sessions' ids from ``origin``: one
    round trip (a statement without parameters goes as a simple query, which may
    hold several). Text, not composed by ``psycopg.sql``, whose literal was adapted
    through the connection at every write (docs/sizing.md, issue 31)."""
    chunks = _chunks(sorted(session_ids), _PAYLOAD_MAX - len(origin) - 1)
    payloads = (f"{origin} {','.join(chunk)}" for chunk in chunks)
    notifies = [f"NOTIFY {CHANNEL}, {_literal(payload)}" for payload in payloads]
    return "; ".join([*notifies, "COMMIT"])


def _literal(text: str) -> str:
    """``text`` as an SQL string literal: in single quotes, each of its own doubled,
    which reads the same whether ``standard_conforming_strings`` is on or off unless
    it holds a backslash; then psycopg's quoting (an ``E''`` literal). Session ids hold
    none (``new_id``)."""
    if "\\" in text:
        return sql.Literal(text).as_string()
    return "'" + text.replace("'", "''") + "'"


def _chunks(ids: list[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    length = 0
    for session_id in ids:
        if chunk and length + len(session_id) + 1 > size:
            yield chunk
            chunk, length = [], 0
        chunk.append(session_id)
        length += len(session_id) + 1
    if chunk:
        yield chunk


Missed = Callable[[], Awaitable[Iterable[str]]]
"""Reads which Sessions may have changed unannounced while the Feed was away."""


class Feed:
    def __init__(self, url: str, origin: str, signals: Signals, missed: Missed) -> None:
        """Use :meth:`start`."""
        self._url = url
        self._origin = origin
        self._signals = signals
        self._missed = missed
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, url: str, origin: str, signals: Signals, missed: Missed) -> Feed:
        """Listening before it returns, so no commit after it is missed."""
        feed = cls(url, origin, signals, missed)
        conn = await feed._listen()
        feed._task = asyncio.create_task(feed._run(conn), name="helmr-store-feed")
        return feed

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # Closed here too: the task may have been cancelled before it entered the
        # connection's context (it had not run yet, or it was reading what it missed).
        if self._conn is not None:
            await self._conn.close()

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        self._conn = conn
        try:
            # What comes with LISTEN's own answer, psycopg takes in and hands here.
            conn.add_notify_handler(lambda notify: self._receive(notify.payload))
            await conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self, conn: psycopg.AsyncConnection[Any]) -> None:
        while True:
            try:
                async with conn:
                    await self._read(conn)
            # Any of psycopg's errors: one the loop does not survive ends the feed for good.
            except psycopg.Error as exc:
                log.warning("lost the store's change feed (%s); reconnecting", exc)
            conn = await self._reconnect()
            self._signals.publish_watched()
            await self._publish_missed()

    async def _read(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Hands each notification to :meth:`_receive` as it arrives; returns by
        raising what ends the connection (or what the handling raised)."""
        pgconn = conn.pgconn
        encoding = conn.info.encoding
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def readable() -> None:
            try:
                pgconn.consume_input()  # psycopg.OperationalError once the server is gone
                while (notify := pgconn.notifies()) is not None:
                    self._receive(notify.extra.decode(encoding))
            except Exception as exc:
                if not ended.done():
                    ended.set_exception(exc)

        loop = asyncio.get_running_loop()
        socket = pgconn.socket
        loop.add_reader(socket, readable)
        try:
            readable()  # what libpq holds already: its socket will not tell
            await ended
        finally:
            loop.remove_reader(socket)

    def _receive(self, payload: str) -> None:
        origin, _, ids = payload.partition(" ")
        if origin != self._origin:
            self._signals.publish(ids.split(","))

    async def _publish_missed(self) -> None:
        try:
            self._signals.publish(await self._missed())
        except Unavailable as exc:  # the server went again: the next reconnect asks again
            log.warning("store change feed: could not read what it missed: %s", exc)

    async def _reconnect(self) -> psycopg.AsyncConnection[Any]:
        while True:
            await asyncio.sleep(RECONNECT_DELAY)
            try:
                return await self._listen()
            except psycopg.OperationalError as exc:
                log.warning("store change feed: %s; retrying", exc)
