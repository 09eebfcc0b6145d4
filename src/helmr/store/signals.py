"""Wake-ups for coroutines waiting on a Session (long polls, SSE, ``receive``).

Take the signal *before* reading the state you wait on, then wait on it if
the state is not there yet: a commit that lands after the signal was taken
sets it, and one that landed before it is already visible to the read, so no
wake-up is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class Signals:
    def __init__(self) -> None:
        # One event per watched Session; publishing retires it so that every
        # event is set at most once and later watchers get a fresh one.
        self._events: dict[str, asyncio.Event] = {}
        # The change feed: every Session touched since the last drain, for the
        # one consumer that mirrors all Sessions (the operator's status sync).
        self._changed: set[str] = set()
        self._any = asyncio.Event()

    def watch(self, session_id: str) -> asyncio.Event:
        event = self._events.get(session_id)
        if event is None:
            event = self._events[session_id] = asyncio.Event()
        return event

    async def changed(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """The Sessions touched since the previous call, waiting up to ``timeout``
        seconds for the first; empty when none was."""
        if not self._changed:
            try:
                await asyncio.wait_for(self._any.wait(), timeout)
            except TimeoutError:
                return set()
        changed, self._changed = self._changed, set()
        self._any.clear()
        return changed

    def publish(self, session_ids: Iterable[str]) -> None:
        session_ids = list(session_ids)
        if session_ids:
            self._changed.update(session_ids)
            self._any.set()
        for session_id in session_ids:
            event = self._events.pop(session_id, None)
            if event is not None:
                event.set()
