"""Follows each changed Session's timeline into its custom resources and Kubernetes Events.

Every object is mirrored on its own: a Session or Turn whose patch fails is
logged and tried again on a later pass, and never keeps the other objects
from being mirrored. Passes are at least ``interval`` apart (unless a status
is asked for), so a Session changed many times within one costs one status
patch. How far each Session's timeline was followed and mirrored is saved in
the store after each pass (helmr.store.mirror_cursors): after a restart the
mirror goes on from there, and the patches a repeat causes are idempotent.
Kubernetes Events are recorded only for facts newer than this process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from kubernetes.client.exceptions import ApiException

from helmr import logs
from helmr.control import Control, SessionView
from helmr.events import EventKind
from helmr.operator import pods
from helmr.operator.kube import NAMESPACE_TERMINATING, namespace_terminating
from helmr.operator.metrics import OperatorMetrics
from helmr.operator.mirror import CustomResourceMirror
from helmr.operator.turn_traces import TurnTraces
from helmr.states import ENDED_SESSION_STATUSES

log = logging.getLogger(__name__)

_TERMINAL = {
    EventKind.TURN_COMPLETED,
    EventKind.TURN_FAILED,
    EventKind.TURN_INTERRUPTED,
    EventKind.TURN_CANCELLED,
}
# Kinds that may be worth a Kubernetes Event on the CR (`kubectl describe`;
# helmr.operator.event_text says which and how); output and message facts
# stay in the timeline only.
_K8S_EVENT_KINDS = _TERMINAL | {
    EventKind.SESSION_INTERRUPT,
    EventKind.SESSION_RESUME,
    EventKind.SESSION_CLOSED,
    EventKind.SESSION_PROCESS_FAILED,
    EventKind.SESSION_EXECUTION_LOST,
    EventKind.SESSION_RECOVERY_GAP,
}
# Sessions mirrored concurrently in a pass (the first ones those asked for).
MIRRORED_AT_ONCE = 16
# The apiserver refused the object as invalid: repeating the same patch cannot help.
_INVALID = (400, 422)

SessionHook = Callable[[SessionView], Awaitable[None]]


class StatusSync:
    def __init__(
        self,
        control: Control,
        mirror: CustomResourceMirror,
        metrics: OperatorMetrics,
        *,
        wake: Callable[[], None],
        hooks: Sequence[SessionHook] = (),
        turn_events: bool = True,
        traces: TurnTraces | None = None,
        interval: float = 0.0,
    ) -> None:
        """``metrics.timeline`` takes in every event followed; ``wake`` asks
        the supervisor for a pass; each of ``hooks`` mirrors
        something more of a changed Session; ``turn_events`` off records no
        Kubernetes Event per Turn (each is an apiserver write); ``traces``, when
        tracing is on, takes in every event too (helmr.operator.turn_traces);
        ``interval`` is the least time between two passes, in seconds."""
        self.control = control
        self.mirror = mirror
        self.metrics = metrics
        self._wake = wake
        self._hooks = tuple(hooks)
        self._turn_events = turn_events
        self._traces = traces
        self._interval = interval
        self._since = datetime.now(UTC)
        # How far each Session's timeline was followed, and what of that is saved.
        self._cursors: dict[str, int] = {}
        self._saved: dict[str, int] = {}
        # Turns seen in the timeline and not yet mirrored, per Session.
        self._turns: dict[str, set[str]] = {}
        # Sessions with something that failed to mirror, for the next pass.
        self._retry: set[str] = set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()  # the next pass's earliest time
        changed: set[str] = set()
        while True:
            try:
                rest = due - loop.time()
                # Changes waiting: only until the pass is due; none: until one comes.
                changed |= await self._changes(max(rest, 0.0) if changed else None)
                if changed:
                    self._wake()  # the supervisor does not wait for the pass
                if loop.time() < due and not self.mirror.requested.is_set():
                    continue
                due = loop.time() + self._interval
                batch, changed = changed, set()
                await self.sync(batch)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("status sync failed; retrying")
                await asyncio.sleep(1)

    async def _changes(self, timeout: float | None) -> set[str]:  # noqa: ASYNC109
        """The Sessions changed in the store, once there are some or the mirror
        was asked for a status, or ``timeout`` seconds pass; by default retries are
        due within a second, else 5 s."""
        if timeout is None:
            timeout = 1.0 if self._retry else 5.0
        changed = asyncio.ensure_future(self.control.changed_sessions(timeout=timeout))
        asked = asyncio.ensure_future(self.mirror.requested.wait())
        try:
            await asyncio.wait((changed, asked), return_when=asyncio.FIRST_COMPLETED)
        finally:
            asked.cancel()
            # Cancelled while it still waits, the change feed keeps what it has.
            changed.cancel()
            await asyncio.wait((changed, asked))
        return set() if changed.cancelled() else changed.result()

    async def sync(self, changed: set[str]) -> None:
        """One pass: wakes the supervisor (a change may need a process started or
        stopped), then mirrors each changed Session, each one asked for (with the
        Turns asked for) and each one left to retry."""
        self._wake()
        pending, self._retry = changed | self._retry, set()
        requested = self.mirror.take_requests()
        for session_id, turn_ids in requested.items():
            self._turns.setdefault(session_id, set()).update(turn_ids)
        # What was asked for first: someone waits for it (a Turn's admission
        # needs its Session's status), while changes are many.
        order = [*sorted(requested), *sorted(pending - set(requested))]
        unknown = [session_id for session_id in order if session_id not in self._cursors]
        if unknown:
            self._saved.update(await self.control.mirrored_through(unknown))
            self._cursors.update((id, self._saved.get(id, 0)) for id in unknown)
        # A few Sessions at a time: each is a few store reads and apiserver writes,
        # round trips that would add up one after another (a pass over 100
        # Sessions took 12 s on a busy PostgreSQL store, one at a time).
        at_once = asyncio.Semaphore(MIRRORED_AT_ONCE)

        async def mirror(session_id: str) -> None:
            async with at_once:
                try:
                    with logs.bound(session=session_id):
                        done = await self._sync_session(session_id)
                except Exception:
                    log.exception("session %s: mirroring failed; retrying", session_id)
                    done = False
            if not done:
                self._retry.add(session_id)

        await asyncio.gather(*(mirror(session_id) for session_id in order))
        await self._save_cursors(order)

    async def _save_cursors(self, synced: list[str]) -> None:
        """Saves how far each Session mirrored this pass is followed, once nothing of
        it is left to retry: a restart then goes on from there, and repeats nothing."""
        advanced = {
            session_id: self._cursors[session_id]
            for session_id in synced
            if session_id not in self._retry
            and session_id not in self._turns
            and self._cursors.get(session_id, 0) > self._saved.get(session_id, 0)
        }
        if advanced:
            await self.control.save_mirrored_through(advanced)
            self._saved.update(advanced)

    async def _sync_session(self, session_id: str) -> bool:
        """Mirrors one Session; False when some of it is left to retry."""
        session = await self.control.get_session(session_id)
        pod = pods.pod_name(session.name, session.process_epoch) if session.process_live else None
        done = await self._attempt(session, "its status", self.mirror.sync_session(session, pod))
        for hook in self._hooks:
            done &= await self._attempt(session, "its status", hook(session))
        turns = self._turns.setdefault(session_id, set())
        await self._follow(session, turns)
        for turn_id in sorted(turns):
            turn = await self.control.get_turn(session_id, turn_id)
            if not self.mirror.has_resource(turn):
                turns.discard(turn_id)  # an API Turn made without one
                continue
            step = self.mirror.sync_turn(session, turn)
            if await self._attempt(session, f"turn {turn_id}", step):
                turns.discard(turn_id)
            else:
                done = False
        if not turns:
            del self._turns[session_id]
        if session.status in ENDED_SESSION_STATUSES:
            self.metrics.timeline.session_ended(session_id)
        return done

    async def _follow(self, session: SessionView, turns: set[str]) -> None:
        """Reads the Session's new timeline events: notes the Turns they change,
        passes them to the metrics and records Kubernetes Events (best effort)."""
        while True:
            page = await self.control.list_events(
                session.id, self._cursors.get(session.id, 0), 1000
            )
            for event in page.records:
                if event.turn_id is not None and event.kind != EventKind.TURN_OUTPUT:
                    turns.add(event.turn_id)
                new = event.created_at >= self._since
                self.metrics.timeline.observe(event, count=new)
                if new:
                    self.metrics.storage_pressure.observe(event)
                if self._traces is not None:
                    self._traces.observe(event, emit=new)
                if new and event.kind in _K8S_EVENT_KINDS:
                    await self._attempt(
                        session,
                        f"event {event.id}",
                        self.mirror.record(session, event, per_turn=self._turn_events),
                    )
            self._cursors[session.id] = page.next_after
            if not page.has_more:
                return

    async def _attempt(self, session: SessionView, what: str, step: Awaitable[None]) -> bool:
        """Runs one object's mirroring step; False when it should be tried again.

        A namespace being deleted ends the session (``namespace_terminating``):
        nothing more of it can be created, so nothing is retried.
        """
        try:
            await step
        except ApiException as e:
            if namespace_terminating(e):
                if session.status not in ENDED_SESSION_STATUSES:
                    log.info("session %s: its namespace is being deleted; it fails", session.id)
                    await self.control.fail_session(session.id, NAMESPACE_TERMINATING)
                return True
            if e.status in _INVALID:
                log.error(
                    "session %s, %s: the apiserver refused it as invalid, not retried: %s",
                    session.id,
                    what,
                    e.body,
                )
                return True
            log.exception("session %s, %s: mirroring failed; retrying", session.id, what)
            return False
        except Exception:
            log.exception("session %s, %s: mirroring failed; retrying", session.id, what)
            return False
        return True
