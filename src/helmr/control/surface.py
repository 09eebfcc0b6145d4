"""What every side of Control is built on: the store, the configuration, and the
long polls' wait, which waits on the store's per-Session signals, never on timers alone.

Each side is a small typed surface over the transaction functions
(:mod:`helmr.control.transaction`), for one caller: the public API
(:mod:`~helmr.control.public_api`), the runner API (:mod:`~helmr.control.runner_api`)
and the operator (:mod:`~helmr.control.operator_api`). Only the operator's is
fenced: the type says which writes the leader's term fences.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from helmr.control.config import ControlConfig
from helmr.control.transaction import Fence
from helmr.errors import InvalidInput
from helmr.store import Store

T = TypeVar("T")


class Connection(Protocol):
    """The connection a long poll answers on (aiohttp's ``request.protocol``, which a
    request keeps anyway: a waiting ``receive`` makes nothing more to be asked)."""

    @property
    def connected(self) -> bool: ...


class Surface:
    _fence: Fence | None = None
    """None: this side's writes are never fenced (only the operator's are)."""

    def __init__(self, store: Store, config: ControlConfig | None = None) -> None:
        self._store = store
        self._config = config or ControlConfig()

    async def _wait_for(
        self,
        session_id: str,
        # A long poll's timeout shapes its answer ("nothing yet"), which cancelling
        # the caller with asyncio.timeout could not give.
        timeout: float,  # noqa: ASYNC109
        attempt: Callable[[], Awaitable[T]],
        ready: Callable[[T], bool],
        *,
        again: Callable[[], Awaitable[T]] | None = None,
        listening: Connection | None = None,
        settles: bool = False,
    ) -> T:
        """Repeats ``attempt`` (``again`` from the second time, if given) after each
        commit touching the Session until its value is ``ready`` or ``timeout``
        seconds pass; returns the last value. With ``listening``, a wake-up whose
        caller has left raises ConnectionResetError rather than attempt: its answer
        would be lost, and an attempt may start a Turn (a runner's process may be
        ending: the Turn would be lost with it, where left queued it waits for the
        next process).

        ``settles``: the first ``attempt`` is a write that touches the Session and
        whose value stands as of its commit (a held settlement, which took the next
        Turn in its own transaction). The watch it is made under is then set by that
        commit's own publish; when no other commit touched the Session
        (``Wakeup.set_last``), the next watch is taken at once and nothing asked until
        a later commit sets it, where asking again would be a write transaction that
        finds what the settlement found (issue 31). Another commit to the Session, this
        store's or another replica's, and it is asked again, as after any wake-up."""
        if timeout < 0:
            raise InvalidInput("timeout must not be negative", timeout=timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stands = False  # the last value is the state's as this watch was taken
        while True:
            with self._store.watching(session_id) as signal:
                if not stands:
                    value = await attempt()
                remaining = deadline - loop.time()
                if ready(value) or remaining <= 0:
                    return value
                attempt = again or attempt
                # Not awaiting until the next watch is taken: a publish in between
                # would find no watch of this waiter's to set.
                stands, settles = settles and signal.set_last(), False
                if stands:
                    continue
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the
                # wait as a Task of its own (with a future and callbacks) for as
                # long as the long poll waits: 1.5 KiB of each waiting runner's
                # receive (benchmarks/bench_long_poll_memory.py).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await signal.wait()
                if not signal.is_set():
                    # Time is up, and nothing touched the Session since ``value`` was
                    # read: asking again would answer the same. (It was asked again,
                    # and for a receive that is a write: at 5,000 idle runners, a
                    # write transaction per runner every 30 s, most of the store's.)
                    return value
            if listening is not None and not listening.connected:
                raise ConnectionResetError(f"the caller waiting on session {session_id} left")
