"""Wake-ups after commits: per-Session signals for waiters, and a change feed.

Waiters (long polls, SSE, ``receive``) take a Session's signal *before*
reading the state they wait on, then wait on it if the state is not there
yet: a commit that lands after the signal was taken sets it, and one that
landed before it is already visible to the read, so no wake-up is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

QUEUED_HINTS = 4096
"""Sessions :meth:`Signals.turn_queued` remembers at most (about 0.5 MiB): past it the
oldest is forgotten, and its runner's next ``receive`` reads first, as with no hint."""


class _Watch:
    """The waiters on one Session, and how many commits touched it, for as long as
    anyone watches it. Lighter than an ``asyncio.Event`` (whose deque is most of its
    0.8 KiB): at 5,000 idle runners each has one, for as long as its ``receive``
    waits."""

    __slots__ = ("touches", "waiters", "watchers")

    def __init__(self) -> None:
        self.touches = 0
        """Commits published touching the Session since the watch was made."""
        self.waiters: list[asyncio.Future[None]] = []
        self.watchers = 0

    def touch(self) -> None:
        self.touches += 1
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class Wakeup:
    """One waiter's hold on its Session's watch (``with signals.watching(sid) as
    wakeup``): ``is_set()`` once a commit touched the Session since it was taken,
    ``await wait()`` until then."""

    __slots__ = ("_seen", "_session_id", "_signals", "_watch")

    def __init__(self, signals: Signals, session_id: str, watch: _Watch) -> None:
        self._signals = signals
        self._session_id = session_id
        self._watch = watch
        self._seen = watch.touches

    def is_set(self) -> bool:
        return self._watch.touches != self._seen

    def set_last(self) -> bool:
        """Whether exactly one commit touched the Session since this was taken. For a
        waiter whose own write touched the Session after it took this (a held
        settlement), that commit was its own, and nothing else changed the Session
        since: what its write answered still stands. Any other commit touching it,
        published before or after the waiter's own (PostgreSQL's store threads answer
        in any order; SQLite's writer publishes each write of a batch apart), counts,
        and one published after the waiter looks sets its next watch, if taken before
        the next ``await``. Commits to other Sessions do not count, so a busy store
        does not make the waiter ask again."""
        return self._watch.touches == self._seen + 1

    async def wait(self) -> None:
        if self.is_set():
            return
        watch = self._watch
        waiter = asyncio.get_running_loop().create_future()
        watch.waiters.append(waiter)
        try:
            await waiter
        finally:
            if not self.is_set():  # cancelled (a timeout): the watch lives on without it
                watch.waiters.remove(waiter)

    def __enter__(self) -> Wakeup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._signals._leave(self._session_id, self._watch)


class Signals:
    def __init__(self) -> None:
        # One entry per Session someone is waiting on: publishing counts a touch
        # on it; the last watcher to leave removes it, so idle Sessions cost nothing.
        self._watches: dict[str, _Watch] = {}
        # The change feed: every Session touched since the last drain, for the
        # one consumer that mirrors all Sessions (the operator's status sync).
        self._changed: set[str] = set()
        self._any = asyncio.Event()
        # Sessions a commit of this process left a Turn queued for, oldest first
        # (a dict: ordered): see turn_queued.
        self._queued: dict[str, None] = {}

    def watching(self, session_id: str) -> Wakeup:
        """The wake-up the next commit touching the Session sets (use it as ``with``)."""
        watch = self._watches.get(session_id)
        if watch is None:
            watch = self._watches[session_id] = _Watch()
        watch.watchers += 1
        return Wakeup(self, session_id, watch)

    def _leave(self, session_id: str, watch: _Watch) -> None:
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

    def turn_queued(self, session_id: str) -> bool:
        """Whether a commit of this process queued a Turn for the Session and none
        of its Turns started since (forgotten once asked): then the runner's
        ``receive`` writes at once, where a read would only find that Turn to start.
        A hint, never the answer: another replica's commit is not seen here (its
        ``receive`` reads first, as without it), and a Turn since cancelled or
        held makes it stale, which costs a write that answers as the read would."""
        if session_id not in self._queued:
            return False
        del self._queued[session_id]
        return True

    def publish(self, session_ids: Iterable[str], queues: Mapping[str, bool] | None = None) -> None:
        """Wakes the waiters on ``session_ids``; ``queues``: the commit's
        :attr:`Tx.queues <helmr.store.tx.Tx.queues>`, for :meth:`turn_queued`."""
        if queues:
            self._note_queues(queues)
        session_ids = list(session_ids)
        # Keys with a ":" wake waiters on something else than a Session (a pooled pod's
        # adoption): Session ids have none, and only Sessions go to the change feed.
        changed = [key for key in session_ids if ":" not in key]
        if changed:
            self._changed.update(changed)
            self._any.set()
        for session_id in session_ids:
            watch = self._watches.get(session_id)
            if watch is not None:
                watch.touch()

    def _note_queues(self, queues: Mapping[str, bool]) -> None:
        for session_id, queued in queues.items():
            self._queued.pop(session_id, None)
            if queued:
                self._queued[session_id] = None  # the newest
        while len(self._queued) > QUEUED_HINTS:
            del self._queued[next(iter(self._queued))]

    def publish_watched(self) -> None:
        """Wakes every waiter as if its Session had changed: for when commits may
        have gone unannounced (another replica's, while the feed was disconnected).
        Waiters read again and find what changed; a needless wake-up costs a read."""
        self.publish(list(self._watches))
