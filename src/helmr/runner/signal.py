"""A turn's cancellation signal: set once, awaitable, never cleared."""

from __future__ import annotations

import asyncio


class Signal:
    """Tells a turn's code to stop its work.

    The runner sets it as soon as the control plane accepts a stop of the turn
    (an interrupt, a cancel) or ends it elsewhere (its deadline, a failed
    session), which the stop channel tells it within milliseconds; when a call
    for the turn is answered ``turn_not_active``; and when the control plane
    stops this process (SIGTERM). Check ``aborted`` between steps, or ``await wait()``
    next to your own work to stop early.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why it was set: ``stop_requested``, ``turn_not_active`` or ``process_stopping``;
        None while not set."""
        return self._reason

    async def wait(self) -> str:
        """Waits until the signal is set; returns its reason."""
        await self._event.wait()
        assert self._reason is not None
        return self._reason

    def abort(self, reason: str) -> None:
        """Sets the signal (the runner does this); the first reason is kept."""
        if self._reason is None:
            self._reason = reason
            self._event.set()
