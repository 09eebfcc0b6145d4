"""``Control``: the async entry point the server and the operator drive.

Every control is one store transaction (run on the store's writer thread)
so a state change commits with the events that record it. Most methods are
a transaction function bound as a method (:mod:`helmr.control.transaction`):
its signature and docs are that function's. The rest are long polls, which
wait on the store's per-Session signals, never on timers alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import TypeVar

from pydantic import JsonValue

from helmr.control import (
    disks,
    limits,
    messages,
    mirror_reads,
    preparation,
    processes,
    record,
    sessions,
    stop_notices,
    storage_pressure,
    turns,
)
from helmr.control.config import ControlConfig
from helmr.control.transaction import Fence, reads, writes, writes_configured
from helmr.control.views import (
    load_session,
    load_session_name,
    load_turn,
    session_counts,
    session_names_not_ended,
)
from helmr.errors import InvalidInput, ReceiveTimeout
from helmr.events import EventPage
from helmr.protocol.api import MessageView, TurnView
from helmr.store import Expired, Store, mirror_cursors

T = TypeVar("T")


class Control:
    def __init__(
        self, store: Store, config: ControlConfig | None = None, *, fence: Fence | None = None
    ) -> None:
        """``fence`` refuses writes by raising (:mod:`helmr.control.transaction`)."""
        self._store = store
        self._config = config or ControlConfig()
        self._fence = fence

    # Public side (the REST API) ------------------------------------------------------------

    open_session = writes(sessions.open_session)
    get_session = reads(load_session)
    get_session_name = reads(load_session_name)
    session_names_not_ended = reads(session_names_not_ended)
    enqueue = writes(turns.enqueue)
    enqueue_answering_session = writes(turns.enqueue_answering_session)
    get_turn = reads(load_turn)
    send = writes(messages.send)
    get_message = reads(messages.load_message)
    interrupt = writes_configured(sessions.interrupt)
    resume = writes(sessions.resume)
    cancel = writes(sessions.cancel)
    close = writes(sessions.close)

    async def wait_turn(
        self,
        session_id: str,
        turn_id: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> TurnView:
        """The Turn once terminal, or as it is when ``timeout`` ends (the wait only)."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.get_turn, session_id, turn_id),
            lambda turn: turn.terminal,
        )

    async def list_events(self, session_id: str, after: int = 0, limit: int = 100) -> EventPage:
        """A page of the Session's timeline after ``after`` (InvalidInput on bad bounds)."""
        return await self._store.page(session_id, after, limit)

    async def wait_events(
        self,
        session_id: str,
        after: int = 0,
        timeout: float = 30.0,  # noqa: ASYNC109 (see _wait_for)
        limit: int = 100,
    ) -> EventPage:
        """The next page after ``after``, waiting up to ``timeout`` for one to exist."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.list_events, session_id, after, limit),
            lambda page: bool(page.records),
        )

    # Runner side (every call: StaleEpoch unless ``epoch`` is the live process) -------------

    async def receive(
        self,
        session_id: str,
        epoch: int,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
        *,
        metadata: dict[str, JsonValue] | None = None,
        tags: list[str] | None = None,
    ) -> TurnView | None:
        """The Turn to run (:func:`helmr.control.turns.take_next`, which records
        ``metadata`` and ``tags`` on the ``turn.running`` of a Turn it starts); None
        once there is none for this process (closing Session drained, or the
        process must stop); ReceiveTimeout after ``timeout``."""
        take_next = partial(
            self._store.write,
            partial(
                turns.take_next, session_id=session_id, epoch=epoch, metadata=metadata, tags=tags
            ),
        )
        answer = await self._wait_for(
            session_id,
            timeout,
            partial(self._look_first, session_id, epoch, take_next),
            lambda found: found is not None,
            # Woken by a commit to the Session, most often the enqueue it waited
            # for: a read first would only add a transaction before the write.
            again=take_next,
        )
        if answer is None:
            raise ReceiveTimeout(f"no turn for session {session_id} within {timeout}s")
        return None if answer == "drained" else answer

    async def _look_first(
        self,
        session_id: str,
        epoch: int,
        take_next: Callable[[], Awaitable[TurnView | turns.Drained | None]],
    ) -> TurnView | turns.Drained | None:
        """``take_next``, in a write transaction only when a read one cannot answer
        (:func:`~helmr.control.turns.look`): most receives find nothing to do, all
        of them at once after a restart."""
        answer = await self._store.read(partial(turns.look, session_id=session_id, epoch=epoch))
        if answer is not turns.Unanswered.TAKE_NEXT:
            return answer
        return await take_next()

    cancel_own = writes(sessions.cancel_own)
    take_code_settings = writes(limits.take_code_settings)
    output = writes(turns.output)
    respond = writes(turns.respond)
    complete = writes(turns.complete)
    fail = writes(turns.fail)
    messages_ready = writes(messages.ready)
    report_message = writes(messages.report)
    report_storage = writes(storage_pressure.report)

    async def next_message(
        self,
        session_id: str,
        epoch: int,
        turn_id: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> MessageView | None:
        """The oldest message not yet started (:func:`helmr.control.messages.next_waiting`),
        or None when ``timeout`` ends first."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(
                self._store.read,
                partial(messages.next_waiting, session_id=session_id, epoch=epoch, turn_id=turn_id),
            ),
            lambda message: message is not None,
        )

    async def requested_stops(
        self,
        session_id: str,
        epoch: int,
        turn_ids: list[str],
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> list[str]:
        """The stop channel: the ids among ``turn_ids`` this process must stop
        (:func:`helmr.control.stop_notices.requested`), as soon as there are any;
        empty when ``timeout`` ends first."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(
                self._store.read,
                partial(
                    stop_notices.requested, session_id=session_id, epoch=epoch, turn_ids=turn_ids
                ),
            ),
            bool,
        )

    # Operator side -------------------------------------------------------------------------

    process_started = writes_configured(processes.started)
    process_prepared = writes(preparation.prepared)
    preparation_failed = writes_configured(preparation.failed)
    overdue_preparations = reads(preparation.overdue)
    process_exited = writes_configured(processes.exited)
    execution_lost = writes_configured(processes.execution_lost)
    expire_deadlines = writes(processes.expire_deadlines)
    next_deadline = reads(processes.next_deadline)
    processes_to_stop = reads(processes.to_stop)
    live_processes = reads(processes.live)
    sessions_needing_runner = reads(processes.needing_runner)
    fail_session = writes(sessions.fail)
    resolve_limits = writes(limits.resolve)
    sessions_without_limits = reads(limits.unresolved)
    expire_idle = writes(limits.expire_idle)
    next_idle_expiry = reads(limits.next_idle_expiry)
    record_event = writes(record.reported)
    session_counts = reads(session_counts)

    # The Computer disk (operator side, and the Workspace routes) ------------------------------

    current_disk = writes(disks.current_disk)
    pending_saves = reads(disks.pending_saves)
    take_save = writes(disks.take_save)
    save_ready = writes(disks.save_ready)
    covered_saves = reads(disks.covered_saves)
    save_failed = writes_configured(disks.save_failed)
    saves_to_prune = reads(disks.saves_to_prune)
    save_pruned = writes(disks.save_pruned)
    get_workspace = reads(disks.workspace_view)
    require_unheld_workspace = reads(disks.require_unheld)
    forget_workspace = writes(disks.forget_workspace)
    reset_workspace = writes(disks.reset_workspace)
    set_storage_limits = writes(storage_pressure.set_limits)
    sessions_under_storage_pressure = reads(storage_pressure.under_pressure)

    # The status mirror's cursors: how far it followed each timeline --------------------------

    mirrored_through = reads(mirror_cursors.load)
    save_mirrored_through = writes(mirror_cursors.save)
    read_sessions_after = reads(mirror_reads.sessions_after)
    read_turns = reads(mirror_reads.turns_of)

    async def changed_sessions(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """Sessions changed since the previous call (one consumer: the status mirror)."""
        return await self._store.changed_sessions(timeout)

    async def expire_history(self, now: datetime) -> Expired:
        """Applies the store's history retention period as of ``now``."""
        return await self._store.expire(now)

    # ---------------------------------------------------------------------------------------

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
    ) -> T:
        """Repeats ``attempt`` (``again`` from the second time, if given) after each
        commit touching the Session until its value is ``ready`` or ``timeout``
        seconds pass; returns the last value."""
        if timeout < 0:
            raise InvalidInput("timeout must not be negative", timeout=timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._store.watching(session_id) as signal:
                value = await attempt()
                remaining = deadline - loop.time()
                if ready(value) or remaining <= 0:
                    return value
                attempt = again or attempt
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
