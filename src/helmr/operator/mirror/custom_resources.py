"""Mirrors the store's state into the custom resources, and back.

The store is the authority (a state change and its events commit together);
CRs are the live face users `kubectl get`. This module:

- creates the Session and Turn CRs of what the REST API admitted (the
  server's ``Mirror``), labelled with their store ids so the operator's
  handlers know they are admitted already, and a new Session's Workspace
  beside its Session (so its first start, on its first Turn's path, need not);
- writes each CR's ``.status`` from the store's view (idempotent merge
  patches, so repeating one after a restart is harmless). Only the status
  sync writes statuses, each from a fresh read of the store: a writer with
  a view of its own (the Turn admitted a moment ago, still ``queued``) could
  land it after the status sync's newer one, and nothing would write the
  status again. The others ask for a status with :meth:`request`;
- writes their ``status.conditions`` (:mod:`helmr.operator.mirror.conditions`);
- records Kubernetes Events on the CRs for lifecycle changes
  (:mod:`helmr.operator.mirror.event_text`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from helmr.control import SessionView, TurnView
from helmr.events import Event
from helmr.kube.client import Kube
from helmr.kube.labels import LABEL_SESSION_ID, LABEL_TURN_ID
from helmr.operator.disks.manifests import build_workspace
from helmr.operator.mirror.conditions import session_observations, settle, turn_observations
from helmr.operator.mirror.event_text import kube_event
from helmr.operator.runners.limits import limits_status
from helmr.operator.written_statuses import WrittenStatuses
from helmr.resources import (
    ActorRef,
    Condition,
    Hold,
    ObjectMeta,
    OwnerReference,
    Session,
    SessionRef,
    SessionSpec,
    SessionStatus,
    Turn,
    TurnError,
    TurnSpec,
    TurnStatus,
    Workspace,
)
from helmr.resources.session import ForkFrom
from helmr.resources.session_env import NO_ENV, SessionEnv
from helmr.states import TurnSource

log = logging.getLogger(__name__)


def turn_cr_name(turn_id: str) -> str:
    """The CR name of an API-created Turn: its id, as a DNS-1123 name."""
    return turn_id.lower().replace("_", "-")


def session_status(view: SessionView, runner_pod: str | None) -> SessionStatus:
    # Every field is set, so the merge patch also clears what no longer holds.
    return SessionStatus(
        session_id=view.id,
        phase=view.status,
        hold=None
        if view.hold is None
        else Hold(hold_id=view.hold.hold_id, reason=view.hold.reason),
        cancel_requested_at=view.cancel_requested_at,
        consecutive_process_failures=view.consecutive_failures,
        process_epoch=view.process_epoch,
        runner_pod=runner_pod,
        active_turn=view.active_turn_id,
        queued_turns=view.queued_turns,
        closed_how=view.closed_how,
        limits=limits_status(view.limits),
    )


def turn_status(view: TurnView) -> TurnStatus:
    status = TurnStatus(
        turn_id=view.id,
        phase=view.status,
        sequence=view.sequence,
        created_at=view.created_at,
        started_at=view.started_at,
        ended_at=view.ended_at,
        has_result=view.has_result,
        reason=view.reason,
        process_epoch=view.epoch,
        error=None
        if view.error is None
        else TurnError(code=view.error.code, message=view.error.message),
    )
    # Set only when there is one: an unset field is left alone by the merge patch.
    if view.has_result:
        status.result = view.result
    if view.has_response:
        status.response = view.response
    return status


# Optional fields are set only when present (a set field is sent, even as null).


def session_manifest(
    session: SessionView, env: SessionEnv = NO_ENV, fork_from: ForkFrom | None = None
) -> Session:
    spec = SessionSpec(
        actor_ref=ActorRef(name=session.actor), workspace=session.workspace, fork_from=fork_from
    )
    if session.key:
        spec.key = session.key
    if env.env:
        spec.env = list(env.env)
    if env.env_from:
        spec.env_from = list(env.env_from)
    return Session(
        metadata=ObjectMeta(
            name=session.name, namespace=session.namespace, labels={LABEL_SESSION_ID: session.id}
        ),
        spec=spec,
    )


def turn_manifest(session: SessionView, turn: TurnView, owner: OwnerReference | None) -> Turn:
    metadata = ObjectMeta(
        name=turn_cr_name(turn.id),
        namespace=session.namespace,
        labels={LABEL_SESSION_ID: session.id, LABEL_TURN_ID: turn.id},
    )
    # Owned by its Session: deleting the Session collects its Turns.
    metadata.owner_references = [] if owner is None else [owner]
    spec = TurnSpec(session_ref=SessionRef(name=session.name), input=turn.input, source=turn.source)
    if turn.idempotency_key:
        spec.idempotency_key = turn.idempotency_key
    return Turn(metadata=metadata, spec=spec)


class WorkspaceResets(Protocol):
    """What the store knows of Workspaces by name, and its reset of an older one's."""

    @property
    def workspace_known(self) -> Callable[[str, str], Awaitable[bool]]: ...

    @property
    def reset_workspace(self) -> Callable[[str, str], Awaitable[None]]: ...


def _nobody(session: SessionView) -> None:
    return None


def _nobody_made(session_id: str, resource: Session, workspace: Workspace | None) -> None:
    return None


def _always() -> bool:
    return True


class CustomResourceMirror:
    def __init__(
        self,
        kube: Kube,
        *,
        admitted: Callable[[SessionView], None] = _nobody,
        created: Callable[[str, Session, Workspace | None], None] = _nobody_made,
        workspaces: WorkspaceResets | None = None,
        api_turn_resources: bool = True,
        followed: Callable[[], bool] = _always,
    ) -> None:
        """``admitted`` is told of each Turn the API admitted (its Session as the
        admission left it), before its resource is made: the supervisor's, so a runner
        starts without waiting for the Turn's resource or for the status sync's pass
        (which may be busy mirroring).
        ``workspaces``: the store's Workspaces, reset when this makes a new Session's
        Workspace over an older one's state (none: the Session's first start makes it).
        ``api_turn_resources`` off makes no resource, status or Event for them.
        ``followed`` says whether a status sync takes the requests here (this replica
        leads): a replica that does not lead drops them, since the leader's status
        sync hears of the same changes from the store's change feed."""
        self.kube = kube
        self._followed = followed
        self._admitted = admitted
        self._created = created
        self._workspaces = workspaces
        self.api_turn_resources = api_turn_resources
        # Turn id → CR name for Turns applied with kubectl (API-created Turns
        # are named after their id). Rebuilt on restart by the resume handler.
        self.turn_names: dict[str, tuple[str, str]] = {}
        # Session CR owner references, for the Turns the API creates.
        self._owners: dict[str, OwnerReference] = {}
        # The last status written per session, to skip patches that change nothing
        # (and to keep its conditions' transition times).
        self._session_statuses = WrittenStatuses[str, SessionStatus](SessionStatus)
        # The Session resource generation whose spec the handlers applied, per session.
        self._generations: dict[str, int] = {}
        # Statuses asked for (Session id -> Turn ids, maybe none), for the status sync.
        self._requested: dict[str, set[str]] = {}
        self.requested = asyncio.Event()
        """Set while there are requests to take."""

    # --- the server's Mirror: objects for what the API admitted

    async def session_started(
        self, session: SessionView, env: SessionEnv, fork_from: ForkFrom | None = None
    ) -> None:
        # The Workspace's POST was the longest step of a pooled start's path from its
        # Turn's admission (16-56 ms of ~60-100, benchmarks/results.md, 4 December):
        # made here, beside the Session's, the start finds it made (and kept).
        created, workspace = await asyncio.gather(
            self.kube.create_resource(session_manifest(session, env, fork_from)),
            self._workspace(session),
            return_exceptions=True,
        )
        if isinstance(created, BaseException):
            raise created
        if created is not None:
            self._owners[session.id] = created.owner_reference()
            self._created(
                session.id, created, None if isinstance(workspace, BaseException) else workspace
            )
        self.request(session.id)
        if isinstance(workspace, BaseException):  # the first start makes it
            raise workspace

    async def _workspace(self, session: SessionView) -> Workspace | None:
        """The Session's Workspace if it is made now (None: it was there already, or
        the first start makes it), its store state reset before it is told of."""
        if self._workspaces is None:
            return None
        # The store is asked beside the POST, not after it: a name never used before is
        # the common case, and then the start call writes nothing more to the store.
        made, known = await asyncio.gather(
            self.kube.create_resource(build_workspace(session.namespace, session.workspace)),
            self._workspaces.workspace_known(session.namespace, session.workspace),
        )
        if made is not None and known:  # an older Workspace's (deleted with kubectl)
            await self._workspaces.reset_workspace(session.namespace, session.workspace)
        return made

    async def turn_enqueued(self, session: SessionView, turn: TurnView) -> None:
        self._admitted(session)
        if not self.api_turn_resources:
            return
        await self.kube.create_resource(turn_manifest(session, turn, await self._owner(session)))
        self.request(session.id, turn.id)

    async def _owner(self, session: SessionView) -> OwnerReference | None:
        owner = self._owners.get(session.id)
        if owner is None:
            cr = await self.kube.get_resource(Session, session.namespace, session.name)
            if cr is None:
                return None
            owner = self._owners[session.id] = cr.owner_reference()
        return owner

    # --- status

    def request(self, session_id: str, turn_id: str | None = None) -> None:
        """Asks the status sync to write the Session's status (and the Turn's) from
        the store as it is then: the object was just created, or just admitted."""
        if not self._followed():
            return
        self._requested.setdefault(session_id, set()).update(() if turn_id is None else (turn_id,))
        self.requested.set()

    def take_requests(self) -> dict[str, set[str]]:
        """The statuses asked for since the last call (the status sync's)."""
        taken, self._requested = self._requested, {}
        self.requested.clear()
        return taken

    def observe_generation(self, session_id: str, generation: int) -> None:
        """The handlers applied the spec of this generation of the Session resource."""
        self._generations[session_id] = generation
        self.request(session_id)

    def status_seen(self, session_id: str, status: SessionStatus) -> None:
        """The status the Session's resource has, as kopf listed it (see
        helmr.operator.written_statuses): the status sync patches it only if it changed.
        Its ``lastRefused`` is not the status sync's to write (helmr.operator.mirror.refusals)."""
        self._session_statuses.seen(session_id, status.model_copy(update={"last_refused": None}))

    def has_resource(self, turn_id: str, source: str) -> bool:
        """Whether the Turn has a resource to mirror: applied with kubectl (its
        admission noted its name; its source is not the API's after a restart,
        before the resume handler notes it again), or made by the API's mirror."""
        return self.api_turn_resources or turn_id in self.turn_names or source != TurnSource.API

    def turn_name(self, session: SessionView, turn_id: str) -> str:
        """The Turn's resource name: as applied with kubectl, or derived from its id."""
        return self.turn_names.get(turn_id, (session.namespace, turn_cr_name(turn_id)))[1]

    async def sync_session(self, view: SessionView, runner_pod: str | None) -> None:
        status = session_status(view, runner_pod)
        generation = self._generations.get(view.id)
        status.observed_generation = generation
        observed = session_observations(view, runner_pod)
        previous = await self._previous_conditions(view)
        status.conditions = settle(previous, observed, datetime.now(UTC), generation)
        # Output streams touch the session on every write; its status rarely changes.
        await self._session_statuses.write(
            view.id,
            status,
            lambda written: self.kube.patch_resource_status(
                Session, view.namespace, view.name, written
            ),
        )

    async def _previous_conditions(self, view: SessionView) -> list[Condition] | None:
        """The conditions last written: remembered, or (after a restart) read back."""
        written = self._session_statuses.last(view.id)
        if written is None:
            cr = await self.kube.get_resource(Session, view.namespace, view.name)
            written = None if cr is None else cr.status
        return None if written is None else written.conditions

    async def sync_turn(self, session: SessionView, view: TurnView) -> None:
        namespace, name = self.turn_names.get(view.id, (session.namespace, turn_cr_name(view.id)))
        status = turn_status(view)
        observed = turn_observations(view, name)
        # Only a terminal Turn has conditions, each dated by its end: nothing to keep.
        if observed:
            status.conditions = settle(None, observed, datetime.now(UTC))
        await self.kube.patch_resource_status(Turn, namespace, name, status)

    async def record(self, session: SessionView, event: Event, *, per_turn: bool = True) -> None:
        """A Kubernetes Event on the Session CR, so `kubectl describe` tells the story
        (none for facts not worth one, nor for Turns when ``per_turn`` is off)."""
        # An API Turn without a resource has no Event either; a kubectl one may.
        if event.turn_id is not None and not self.api_turn_resources:
            per_turn = per_turn and event.turn_id in self.turn_names
        told = kube_event(
            event, lambda turn_id: self.turn_name(session, turn_id), per_turn=per_turn
        )
        if told is None:
            return
        owner = await self._owner(session)
        await self.kube.record_event(
            Session,
            session.namespace,
            session.name,
            told.reason,
            told.message[:1024],
            warning=told.warning,
            uid=None if owner is None else owner.uid,
        )
