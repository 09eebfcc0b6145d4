"""The runner API's Control: what a runner process asks of its Session.

Every call is fenced by the process's epoch: ``StaleEpoch`` unless ``epoch`` is
the live process's. Most are transaction functions bound as methods
(:mod:`helmr.control.transaction`); the rest are long polls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from pydantic import JsonValue

from helmr.control import (
    adoptions,
    limits,
    messages,
    sessions,
    stop_notices,
    storage_pressure,
    turns,
)
from helmr.control.surface import Connection, Surface
from helmr.control.transaction import reads, writes
from helmr.errors import ReceiveTimeout
from helmr.protocol.api import MessageView, TurnView
from helmr.store import Store
from helmr.store.rows import AdoptionRow


class RunnerControl(Surface):
    async def receive(
        self,
        session_id: str,
        epoch: int,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
        *,
        listening: Connection | None = None,
        metadata: dict[str, JsonValue] | None = None,
        tags: list[str] | None = None,
    ) -> TurnView | None:
        """The Turn to run (:func:`helmr.control.turns.take_next`, which records
        ``metadata`` and ``tags`` on the ``turn.running`` of a Turn it starts); None
        once there is none for this process (closing Session drained, or the
        process must stop); ReceiveTimeout after ``timeout``. A Turn is started on a
        wake-up only while the runner is ``listening`` (ConnectionResetError once it
        left: its process may be ending, and a Turn started for it would be lost)."""
        asked = _Receive(self._store, session_id, epoch, metadata, tags)
        answer = await self._next_turn(
            session_id, timeout, asked.look_first, asked.again, listening
        )
        return _received(answer, session_id, timeout)

    async def started(self, session_id: str, epoch: int) -> TurnView | None:
        """``receive`` asked not to start (``start: false``): the Turn already started
        for this process, none started for it from then on
        (:func:`helmr.control.turns.fence_starts`); None once there is none for it;
        ReceiveTimeout at once when none was started (nothing is waited for)."""
        fence = partial(turns.fence_starts, session_id=session_id, epoch=epoch)
        answer = await self._store.write(fence)
        return _received(answer, session_id, None)

    def settle_and_receive(
        self,
        settle: Callable[[], Awaitable[TurnView | turns.Drained | None]],
        session_id: str,
        epoch: int,
        timeout: float,
        *,
        holding: Callable[[], Awaitable[object]],
        listening: Connection,
        metadata: dict[str, JsonValue] | None = None,
        tags: list[str] | None = None,
    ) -> Awaitable[TurnView | turns.Drained | None]:
        """``settle`` (a settlement with its next receive, :meth:`complete_and_take_next`
        or :meth:`fail_and_take_next`, asked with ``metadata`` and ``tags``) and, when it
        started no Turn, a ``receive``'s wait for one (runner protocol 5): ``holding``
        is awaited between the two, once the settlement has committed, which the wait
        never undoes. None when ``timeout`` ends first. A Turn is started after the
        settlement only while the runner is ``listening``, as for :meth:`receive`.
        A plain function, as :meth:`_next_turn`: the wait is the one frame kept, and it
        drops ``settle`` (the settled result with it) once it is done."""
        asked = _Receive(self._store, session_id, epoch, metadata, tags)
        return self._next_turn(
            session_id,
            timeout,
            partial(_settling, settle, holding),
            asked.again,
            listening,
            settles=True,
        )

    def _next_turn(
        self,
        session_id: str,
        timeout: float,
        first: Callable[[], Awaitable[TurnView | turns.Drained | None]],
        take_next: Callable[[], Awaitable[TurnView | turns.Drained | None]],
        listening: Connection | None,
        *,
        settles: bool = False,
    ) -> Awaitable[TurnView | turns.Drained | None]:
        """``first``, then ``take_next`` after each commit to the Session while the
        runner is ``listening``, until a Turn or the end comes (None: ``timeout``
        ended first). A plain function: a frame of its own would keep ``first``
        for as long as the wait waits. ``settles``: ``first`` is a held settlement,
        whose own commit's wake-up is not asked again (``Surface._wait_for``)."""
        return self._wait_for(
            session_id,
            timeout,
            first,
            _found,
            # Woken by a commit to the Session, most often the enqueue it waited
            # for: a read first would only add a transaction before the write.
            again=take_next,
            listening=listening,
            settles=settles,
        )

    adoption_of_pod = reads(adoptions.of_pod)

    async def adoption(
        self,
        pod_uid: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> AdoptionRow | None:
        """The adoption of the pooled pod ``pod_uid`` as soon as there is one; None
        when ``timeout`` ends first."""
        return await self._wait_for(
            adoptions.adoption_signal(pod_uid),
            timeout,
            partial(self._store.read, partial(adoptions.of_pod, pod_uid=pod_uid)),
            lambda found: found is not None,
        )

    cancel_own = writes(sessions.cancel_own)
    take_code_settings = writes(limits.take_code_settings)
    output = writes(turns.output)
    respond = writes(turns.respond)
    output_batch = writes(turns.output_batch)
    complete = writes(turns.complete)
    fail = writes(turns.fail)
    complete_and_take_next = writes(turns.complete_and_take_next)
    fail_and_take_next = writes(turns.fail_and_take_next)
    release = writes(turns.release)
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
        (:func:`helmr.control.stop_notices.requested`), as soon as there are any or
        the process runs no Turn; empty when ``timeout`` ends first."""
        to_stop = await self._wait_for(
            session_id,
            timeout,
            partial(
                self._store.read,
                partial(
                    stop_notices.requested, session_id=session_id, epoch=epoch, turn_ids=turn_ids
                ),
            ),
            lambda to_stop: to_stop is not None,
        )
        return [] if to_stop is None else to_stop


def _received(
    answer: TurnView | turns.Drained | None, session_id: str, timeout: float | None
) -> TurnView | None:
    """A receive's answer: the Turn, or None once there is none for the process
    (drained); ReceiveTimeout when none came within ``timeout`` (None: none was
    started, and nothing waited for)."""
    if answer is None:
        waited = f"within {timeout}s" if timeout is not None else "started for its process"
        raise ReceiveTimeout(f"no turn for session {session_id} {waited}")
    return None if answer == "drained" else answer


def _found(answer: TurnView | turns.Drained | None) -> bool:
    return answer is not None


async def _settling(
    settle: Callable[[], Awaitable[TurnView | turns.Drained | None]],
    holding: Callable[[], Awaitable[object]],
) -> TurnView | turns.Drained | None:
    """A held settlement's first attempt: the settlement, then ``holding`` if it
    started no Turn (in the wait's watch: a commit from then on wakes it)."""
    answer = await settle()
    if answer is None:
        await holding()
    return answer


class _Receive:
    """What a waiting ``receive`` keeps: at 5,000 idle runners, one each for as long
    as it waits, so no partials or closures (``bench_long_poll_memory.py``)."""

    __slots__ = ("_epoch", "_metadata", "_session_id", "_store", "_tags")

    def __init__(
        self,
        store: Store,
        session_id: str,
        epoch: int,
        metadata: dict[str, JsonValue] | None,
        tags: list[str] | None,
    ) -> None:
        self._store = store
        self._session_id = session_id
        self._epoch = epoch
        self._metadata = metadata
        self._tags = tags

    async def look_first(self) -> TurnView | turns.Drained | None:
        """``take_next``, in a write transaction only when a read one cannot answer
        (:func:`~helmr.control.turns.look`): most receives find nothing to do, all
        of them at once after a restart. But when this replica has just queued a Turn
        for the Session (:meth:`Store.turn_queued`), the read would only find that
        Turn to start: the write comes at once (a stale hint costs a write that
        answers as the read would)."""
        if self._store.turn_queued(self._session_id):
            return await self.take_next()
        look = partial(turns.look, session_id=self._session_id, epoch=self._epoch)
        answer = await self._store.read(look)
        if answer is not turns.Unanswered.TAKE_NEXT:
            return answer
        return await self.take_next()

    async def take_next(self, *, woken: bool = False) -> TurnView | turns.Drained | None:
        take = partial(
            turns.take_next,
            session_id=self._session_id,
            epoch=self._epoch,
            metadata=self._metadata,
            tags=self._tags,
            woken=woken,
        )
        return await self._store.write(take)

    async def again(self) -> TurnView | turns.Drained | None:
        """``take_next`` as the wait asks it after a commit woke it (``woken``)."""
        return await self.take_next(woken=True)
