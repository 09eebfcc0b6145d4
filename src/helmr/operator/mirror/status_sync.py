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
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime
from functools import partial

from helmr import logs
from helmr.control import SessionView, TurnView
from helmr.control.operator_api import OperatorControl
from helmr.events import TURN_ENDINGS, Event, EventKind, EventPage
from helmr.kube.client import namespace_terminating
from helmr.kube.errors import BadRequest, Invalid, KubeError
from helmr.operator.at_once import AT_ONCE, each_at_once
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.runners import pods
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.operator.telemetry.turn_traces import TurnTraces
from helmr.states import ENDED_SESSION_STATUSES, FailureReason

log = logging.getLogger(__name__)

# Kinds that may be worth a Kubernetes Event on the CR (`kubectl describe`;
# helmr.operator.mirror.event_text says which and how); output and message facts
# stay in the timeline only.
_K8S_EVENT_KINDS = TURN_ENDINGS.keys() | {
    EventKind.SESSION_INTERRUPT,
    EventKind.SESSION_RESUME,
    EventKind.SESSION_CLOSED,
    EventKind.SESSION_PROCESS_FAILED,
    EventKind.SESSION_EXECUTION_LOST,
    EventKind.SESSION_RECOVERY_GAP,
}
# Sessions mirrored concurrently in a pass (the first ones those asked for).
# Sessions read in one transaction in a pass, each with up to this many of its new
# events (one with more reads the rest on its own).
READ_AT_ONCE = 64
EVENTS_READ_AT_ONCE = 200
# The apiserver refused the object as invalid: repeating the same patch cannot help.
_INVALID = (BadRequest, Invalid)

SessionHook = Callable[[SessionView], Awaitable[None]]


def default_runner_pod(session: SessionView) -> str:
    """The pod a cold start gives the Session's live process."""
    return pods.pod_name(session.name, session.process_epoch)


class StatusSync:
    def __init__(
        self,
        control: OperatorControl,
        mirror: CustomResourceMirror,
        metrics: OperatorMetrics,
        *,
        wake: Callable[[Collection[str]], None],
        hooks: Sequence[SessionHook] = (),
        turn_events: bool = True,
        traces: TurnTraces | None = None,
        interval: float = 0.0,
        runner_pod: Callable[[SessionView], str] = default_runner_pod,
    ) -> None:
        """``metrics.timeline`` takes in every event followed; ``wake`` tells the
        control plane which Sessions changed (the supervisor passes, the disk keeper
        takes their saves); each of ``hooks`` mirrors
        something more of a changed Session, before its own status; ``turn_events`` off records no
        Kubernetes Event per Turn (each is an apiserver write); ``traces``, when
        tracing is on, takes in every event too (helmr.operator.telemetry.turn_traces);
        ``interval`` is the least time between two passes, in seconds; ``runner_pod``
        names the pod of a Session's live process (a warm pool's adopted pod has its
        pool's name: ``WarmPools.runner_pod``)."""
        self.control = control
        self.mirror = mirror
        self.metrics = metrics
        self._wake = wake
        self._hooks = tuple(hooks)
        self._turn_events = turn_events
        self._traces = traces
        self._interval = interval
        self._runner_pod = runner_pod
        self._since = datetime.now(UTC)
        # How far each Session's timeline was followed, and what of that is saved.
        self._cursors: dict[str, int] = {}
        self._saved: dict[str, int] = {}
        # Turns seen in the timeline and not yet mirrored, per Session.
        self._turns: dict[str, set[str]] = {}
        # API Turns not yet ended that have no resource (``api_turn_resources`` off),
        # per Session: their changes are not followed into a read of them.
        self._without_resource: dict[str, set[str]] = {}
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
                fresh = await self._changes(max(rest, 0.0) if changed else None)
                if fresh:
                    self._wake(fresh)  # neither waits for the pass
                changed |= fresh
                if loop.time() < due and not self.mirror.requested.is_set():
                    continue
                due = loop.time() + self._interval
                batch, changed = changed, set()
                await self._mirror(batch)  # each of its changes woken as it came
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
        """One pass: wakes the supervisor and the disk keeper (a change may need a
        process started or stopped, or a save taken), then mirrors each changed
        Session, each one asked for (with the Turns asked for) and each one left to
        retry."""
        self._wake(changed)
        await self._mirror(changed)

    async def _mirror(self, changed: set[str]) -> None:
        """:meth:`sync`'s pass, with no wake: :meth:`run` wakes each change as it
        comes, and a second wake at the pass read the changed Sessions' saves again."""
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
        for start in range(0, len(order), READ_AT_ONCE):
            await self._sync_batch(order[start : start + READ_AT_ONCE])
        await self._save_cursors(order)

    async def _sync_batch(self, batch: list[str]) -> None:
        """Mirrors a few Sessions from one read of them and their new events, then their
        Turns from one read of those: a transaction per Session, page and Turn cost a
        pass more than its patches (docs/sizing.md)."""
        read = await self.control.read_sessions_after(
            {session_id: self._cursors.get(session_id, 0) for session_id in batch},
            EVENTS_READ_AT_ONCE,
        )

        async def mirrored(session_id: str, step: Callable[[], Awaitable[bool]]) -> None:
            try:
                with logs.bound(session=session_id):
                    done = await step()
            except Exception:
                log.exception("session %s: mirroring failed; retrying", session_id)
                done = False
            if not done:
                self._retry.add(session_id)

        followed: dict[str, SessionView] = {}

        async def follow(session_id: str) -> bool:
            found = read.get(session_id)
            # Not read with the others: not in the store, and this says so.
            session = await self.control.get_session(session_id) if found is None else found.session
            done = await self._sync_session(session, None if found is None else found.events)
            followed[session_id] = session
            return done

        # A few Sessions at a time: each is a few apiserver writes, round trips
        # that would add up one after another.
        await each_at_once(AT_ONCE, (partial(mirrored, id, partial(follow, id)) for id in batch))
        wanted = [(id, turn_id) for id in followed for turn_id in self._turns.get(id, ())]
        turns = await self.control.read_turns(wanted) if wanted else {}
        await each_at_once(
            AT_ONCE,
            (
                partial(mirrored, id, partial(self._sync_turns, session, turns))
                for id, session in followed.items()
            ),
        )

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

    async def _sync_session(self, session: SessionView, events: EventPage | None) -> bool:
        """Mirrors the Session's status and follows its timeline from ``events`` (its
        first page, read with it) on; False when some of it is left to retry."""
        pod = self._runner_pod(session) if session.process_live else None
        # The hooks first: a kubectl user who sees the Session Closed deletes its
        # Workspace next, which the admission policy refuses while its status
        # still names the Session.
        done = True
        for hook in self._hooks:
            done &= await self._attempt(session, "its status", hook(session))
        done &= await self._attempt(session, "its status", self.mirror.sync_session(session, pod))
        await self._follow(session, events)
        return done

    async def _sync_turns(
        self, session: SessionView, found: dict[tuple[str, str], TurnView]
    ) -> bool:
        """Mirrors the Session's Turns that changed, read (``found``) after its
        timeline was followed; False when some of them are left to retry."""
        done = True
        turns = self._turns.get(session.id, set())
        for turn_id in sorted(turns):
            turn = found.get((session.id, turn_id))
            if turn is None or not self.mirror.has_resource(turn.id, turn.source):
                # Gone with its history, or an API Turn made without a resource
                # (known only now, after a restart: its turn.queued came before).
                turns.discard(turn_id)
                if turn is not None and not turn.terminal:
                    self._without_resource.setdefault(session.id, set()).add(turn_id)
                continue
            if await self._attempt(
                session, f"turn {turn_id}", self.mirror.sync_turn(session, turn)
            ):
                turns.discard(turn_id)
            else:
                done = False
        if not turns:
            self._turns.pop(session.id, None)
        if session.status in ENDED_SESSION_STATUSES:
            self.metrics.timeline.session_ended(session.id)
            self._without_resource.pop(session.id, None)
        return done

    async def _follow(self, session: SessionView, events: EventPage | None) -> None:
        """Reads the Session's new timeline events (from ``events`` on, when given):
        notes the Turns they change, passes them to the metrics and records
        Kubernetes Events (best effort)."""
        page = events
        while True:
            if page is None:
                page = await self.control.list_events(
                    session.id, self._cursors.get(session.id, 0), 1000
                )
            for event in page.records:
                if event.turn_id is not None and event.kind != EventKind.TURN_OUTPUT:
                    self._note_turn(session.id, event.turn_id, event)
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
            page = None

    def _note_turn(self, session_id: str, turn_id: str, event: Event) -> None:
        """Notes the Turn ``event`` changed, to mirror its status; not an API Turn made
        without a resource, which its turn.queued tells (so it is never read)."""
        without = self._without_resource.get(session_id, set())
        if event.kind == EventKind.TURN_QUEUED:
            source = event.data.get("source") if isinstance(event.data, dict) else None
            if isinstance(source, str) and not self.mirror.has_resource(turn_id, source):
                self._without_resource.setdefault(session_id, without).add(turn_id)
                return
        if turn_id not in without:
            self._turns.setdefault(session_id, set()).add(turn_id)
        elif event.kind in TURN_ENDINGS:
            without.discard(turn_id)
            if not without:
                del self._without_resource[session_id]

    async def _attempt(self, session: SessionView, what: str, step: Awaitable[None]) -> bool:
        """Runs one object's mirroring step; False when it should be tried again.

        A namespace being deleted ends the session (``namespace_terminating``):
        nothing more of it can be created, so nothing is retried.
        """
        try:
            await step
        except KubeError as e:
            if namespace_terminating(e):
                if session.status not in ENDED_SESSION_STATUSES:
                    log.info("session %s: its namespace is being deleted; it fails", session.id)
                    await self.control.fail_session(session.id, FailureReason.NAMESPACE_TERMINATING)
                return True
            if isinstance(e, _INVALID):
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
