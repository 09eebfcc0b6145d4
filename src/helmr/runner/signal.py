"""A turn's cancellation signal: set once, awaitable, never cleared."""

from __future__ import annotations

import asyncio


class Signal:
    """Tells a turn's code to stop its work.

    The runner sets it when the control plane stops this process (SIGTERM:
    an interrupt, the turn's deadline, a cancel, a suspension) or answers a
    call for the turn with ``turn_not_active`` (the turn was interrupted or
    cancelled elsewhere). Check ``aborted`` between steps, or ``await wait()``
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
        """Why it was set: ``process_stopping`` or ``turn_not_active``; None while not set."""
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
