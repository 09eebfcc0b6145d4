"""Wake-ups after commits: per-Session signals for waiters, and a change feed.

Waiters (long polls, SSE, ``receive``) take a Session's signal *before*
reading the state they wait on, then wait on it if the state is not there
yet: a commit that lands after the signal was taken sets it, and one that
landed before it is already visible to the read, so no wake-up is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class _Watch:
    __slots__ = ("event", "watchers")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.watchers = 0


class Signals:
    def __init__(self) -> None:
        # One entry per Session someone is waiting on. Publishing retires it,
        # so each event is set at most once and later watchers get a fresh
        # one; the last watcher to leave removes it, so idle Sessions cost nothing.
        self._watches: dict[str, _Watch] = {}
        # The change feed: every Session touched since the last drain, for the
        # one consumer that mirrors all Sessions (the operator's status sync).
        self._changed: set[str] = set()
        self._any = asyncio.Event()

    @contextmanager
    def watching(self, session_id: str) -> Iterator[asyncio.Event]:
        """The signal the next commit touching the Session sets."""
        watch = self._watches.get(session_id)
        if watch is None:
            watch = self._watches[session_id] = _Watch()
        watch.watchers += 1
        try:
            yield watch.event
        finally:
            watch.watchers -= 1
            if not watch.watchers and self._watches.get(session_id) is watch:
                del self._watches[session_id]

    async def changed(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """The Sessions touched since the previous call, waiting up to ``timeout``
        seconds for the first; empty when none was."""
        if not self._changed:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a
            # cancellation that comes as a change does (its consumer never stops).
            try:
                async with asyncio.timeout(timeout):
                    await self._any.wait()
            except TimeoutError:
                return set()
        changed, self._changed = self._changed, set()
        self._any.clear()
        return changed

    def publish(self, session_ids: Iterable[str]) -> None:
        session_ids = list(session_ids)
        # Keys with a ":" wake waiters on something else than a Session (a pooled pod's
        # adoption): Session ids have none, and only Sessions go to the change feed.
        changed = [key for key in session_ids if ":" not in key]
        if changed:
            self._changed.update(changed)
            self._any.set()
        for session_id in session_ids:
            watch = self._watches.pop(session_id, None)
            if watch is not None:
                watch.event.set()

    def publish_watched(self) -> None:
        """Wakes every waiter as if its Session had changed: for when commits may
        have gone unannounced (another replica's, while the feed was disconnected).
        Waiters read again and find what changed; a needless wake-up costs a read."""
        self.publish(list(self._watches))
