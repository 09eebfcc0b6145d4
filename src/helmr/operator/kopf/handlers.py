"""kopf handlers, named ``<kind>_<event>``: each adapts one Kubernetes fact
to one Control call. All state lives in the store; these stay thin."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import kopf

from helmr import logs
from helmr.control import SessionView
from helmr.errors import NotFound, SessionNotOpen
from helmr.kube.labels import (
    LABEL_COMPONENT,
    LABEL_SAVE_VERSION,
    LABEL_SESSION_ID,
    LABEL_TURN_ID,
    RUNNER,
)
from helmr.kube.snapshots import SNAPSHOT_CONTENTS, SNAPSHOT_GROUP, SNAPSHOT_VERSION, SNAPSHOTS
from helmr.operator.control_plane import ControlPlane
from helmr.operator.kopf import settings as kopf_settings
from helmr.operator.kopf.forks import fork_declared
from helmr.operator.kopf.handler_logs import KOPF_OBJECTS, RoutineSuccesses, hear_the_loop
from helmr.operator.kopf.namespaces import install as read_listed_namespaces
from helmr.operator.kopf.session_controls import NotYet, apply_spec
from helmr.operator.kopf.waiting_turns import WaitingTurns
from helmr.operator.mirror.lost_history import HistoryLost, admitted, fail_session, refuse_turn
from helmr.operator.mirror.refusals import (
    refuse_admission,
    refuse_unopened,
    tell_refused,
    tell_session_not_found,
)
from helmr.operator.runners.pod_reports import PodReport
from helmr.operator.runners.pods import gated_claim
from helmr.operator.settings import Settings
from helmr.resources import (
    ACTORS,
    GROUP,
    SESSIONS,
    TURNS,
    VERSION,
    Actor,
    DeclaredControl,
    Session,
    Turn,
)
from helmr.states import TERMINAL_TURN_STATUSES, TurnSource

log = logging.getLogger(__name__)

# Before kopf's observers start (helmr.operator.kopf.namespaces says why).
read_listed_namespaces()


def _namespaced(namespace: str | None) -> str:
    # Every resource these handlers watch is namespaced; kopf types it loosely.
    if namespace is None:
        raise kopf.PermanentError("a namespaced object came without a namespace")
    return namespace


def _plane(memo: Any) -> ControlPlane:
    plane: ControlPlane = memo["control_plane"]
    return plane


def _waiting_turns(memo: Any) -> WaitingTurns:
    waiting: WaitingTurns = memo["waiting_turns"]
    return waiting


@kopf.on.startup()
async def operator_startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    plane_settings = Settings()
    # kopf's handler (from `kopf run --log-format ...`) writes Helmr's format from
    # here on, kopf's own lines included (helmr.logs).
    logs.configure(plane_settings.log_format)
    KOPF_OBJECTS.addFilter(RoutineSuccesses())
    hear_the_loop()
    kopf_settings.configure(settings)
    plane = memo["control_plane"] = await ControlPlane.start(plane_settings)
    # In the operator's memo before any resource's handler copies it (kopf gives
    # each resource a shallow copy): one registry shared by Turns and Sessions.
    memo["waiting_turns"] = WaitingTurns()
    # kopf watches nothing until its startup handlers return: the handlers below
    # are the leader's work, so a replica that does not lead serves only the APIs.
    await plane.leadership.elected.wait()


@kopf.on.cleanup()
async def operator_cleanup(memo: Any, **_: Any) -> None:
    await _plane(memo).stop()


@kopf.on.resume(GROUP, VERSION, SESSIONS)
@kopf.on.create(GROUP, VERSION, SESSIONS)
async def session_admit(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    uid: str,
    labels: kopf.Labels,
    memo: Any,
    **_: Any,
) -> None:
    """A Session applied with kubectl opens a store session (once, keyed by the CR's uid);
    its spec's controls apply: all are asked when it opens (a new resource's every
    field is new, so ``spec.interrupt`` opens it held), and ``spec.state`` and
    ``spec.resume``, levels, are applied again on a restart. One admitted before whose
    history the store lost fails instead of opening again."""
    plane = _plane(memo)
    session = Session.from_manifest(body)
    try:
        # On a restart kopf resumes every Session: one read each, no write.
        view = await _stored_session(plane, session)
    except HistoryLost:
        await fail_session(plane.kube, session)
        return
    asked: tuple[DeclaredControl, ...] = ()
    if view is None:
        if LABEL_SESSION_ID in labels:
            return  # the label names no Session of the store's placed here
        asked = ("spec.state", "spec.interrupt", "spec.resume")
        spec = session.spec
        if spec.fork_from is not None:
            view = await fork_declared(plane.control, plane.kube, session, f"k8s:{uid}")
            if view is None:
                return  # refused, and told on the resource
        else:
            view = await plane.control.open_session(
                namespace=_namespaced(namespace),
                name=name,
                actor=spec.actor_ref.name,
                workspace=spec.workspace,
                key=spec.key,
                idempotency_key=f"k8s:{uid}",
            )
        # Its limits (its own overrides among them: runners.limits) are read with its
        # Actor by the supervisor's next pass: now.
        plane.supervisor.wake()
    if session.status is not None:
        # Resumed after a restart: its status patched again only where it changed.
        plane.mirror.status_seen(view.id, session.status)
    await _apply_controls(plane, view, session, asked)
    await _admit_waiting(plane, _waiting_turns(memo), session, view)


@kopf.on.update(GROUP, VERSION, SESSIONS, field="spec")
async def session_spec_changed(body: kopf.Body, old: Any, new: Any, memo: Any, **_: Any) -> None:
    """``kubectl patch``/``apply`` of a Session's controls: close, cancel, interrupt, resume."""
    plane = _plane(memo)
    session = Session.from_manifest(body)
    try:
        view = await _stored_session(plane, session)
    except HistoryLost:
        await fail_session(plane.kube, session)
        return
    if view is None:
        raise kopf.TemporaryError(f"Session {session.metadata.name} is not admitted yet", delay=1)
    before, after = old or {}, new or {}
    asked = tuple(
        control
        for control, field in _CONTROL_FIELDS.items()
        if after.get(field) is not None and after.get(field) != before.get(field)
    )
    await _apply_controls(plane, view, session, asked)


# Each declarative control and its field in a Session's spec.
_CONTROL_FIELDS: dict[DeclaredControl, str] = {
    "spec.state": "state",
    "spec.interrupt": "interrupt",
    "spec.resume": "resume",
}


async def _apply_controls(
    plane: ControlPlane, view: SessionView, session: Session, asked: Sequence[DeclaredControl]
) -> None:
    """Applies the Session's controls (``asked``: those whose fields are new) and
    tells the ones refused (helmr.operator.mirror.refusals)."""
    session_id = view.id
    try:
        refused = await apply_spec(plane.control, view, session.spec, asked=asked)
        await tell_refused(plane.kube, session, refused)
    except NotYet as e:
        raise kopf.TemporaryError(str(e), delay=1) from e
    finally:
        generation = session.metadata.generation
        if generation is not None:
            plane.mirror.observe_generation(session_id, generation)
        plane.mirror.request(session_id)
        plane.supervisor.wake()


@kopf.on.event(GROUP, VERSION, SESSIONS)
async def session_deleted(type: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    """Deleting the CR cancels the session; its pods go with it (owner references).

    A watch event, not a delete handler: those run only under a finalizer, and
    a finalizer would wedge namespace deletion whenever no operator runs. A
    deletion missed while the operator was down is caught by the supervisor.
    """
    if type != "DELETED":
        return
    status = Session.from_manifest(body).status
    session_id = None if status is None else status.session_id
    if session_id:
        # An ended session has nothing left to cancel; an unknown one, nothing at all.
        with contextlib.suppress(SessionNotOpen, NotFound):
            await _plane(memo).control.cancel(session_id)


async def _stored_session(plane: ControlPlane, owner: Session) -> SessionView | None:
    """The store's view of a Session resource, or None if it is not admitted yet:
    found by its status once mirrored or, for one the API created, at once by its
    label (checked against the store, since anyone who may create Sessions may set
    that label). Raises :class:`HistoryLost` (see :func:`admitted`)."""
    view = await admitted(plane.control, owner)
    labelled = (owner.metadata.labels or {}).get(LABEL_SESSION_ID)
    if view is not None or labelled is None:
        return view
    try:
        view = await plane.control.get_session(labelled)
    except NotFound:
        return None
    placed = (view.namespace, view.name) == (owner.metadata.namespace, owner.metadata.name)
    return view if placed else None


MISSING_SESSION_MAX_DELAY = 30.0
"""The longest a Turn naming a missing Session waits between asks (seconds)."""


def missing_session_delay(retry: int) -> float:
    """Seconds before a Turn naming a missing Session asks again: 1, 2, 4, ... up to
    ``MISSING_SESSION_MAX_DELAY``. Each ask costs the apiserver a write (kopf's
    progress annotation on the Turn), so a Turn whose ``sessionRef`` has a typo
    must not ask every second for ever. The wait is not the Turn's admission
    delay: its Session's admission admits it (helmr.operator.kopf.waiting_turns);
    these asks are for after a restart, which forgets the Turns waiting."""
    return min(2.0 ** min(retry, 16), MISSING_SESSION_MAX_DELAY)


@kopf.on.resume(GROUP, VERSION, TURNS)
@kopf.on.create(GROUP, VERSION, TURNS)
async def turn_admit(
    body: kopf.Body,
    name: str,
    namespace: str | None,
    uid: str,
    memo: Any,
    retry: int = 0,
    **_: Any,
) -> None:
    """A Turn applied with kubectl is admitted like an API enqueue (FIFO, once). One
    whose status shows it ended is never admitted again (spec/000: "Helmr never
    replays a completed, interrupted or failed Turn"); one for a Session that admits
    no Turns (closing or ended) fails (``session_not_open``), as does one for a
    Session whose history the store lost (``history_lost``). One naming a Session
    that does not exist waits for it, as a pod waits for its ConfigMap: the
    Session's admission admits it (helmr.operator.kopf.waiting_turns), and kopf asks
    again less and less often (``missing_session_delay``) in case this process
    restarts meanwhile."""
    plane = _plane(memo)
    namespace = _namespaced(namespace)
    turn_resource = Turn.from_manifest(body)
    if _admitted_or_ended(turn_resource):
        return
    session_name = turn_resource.spec.session_ref.name
    waiting = _waiting_turns(memo)
    owner = await plane.kube.get_resource(Session, namespace, session_name)
    if owner is None:
        missing = (
            f"Session {session_name} does not exist in namespace {namespace}:"
            " the Turn is admitted once it is created"
        )
        if retry == 0:
            await tell_session_not_found(plane.kube, turn_resource, missing)
        waiting.wait(namespace, session_name, name, uid)
        raise kopf.TemporaryError(missing, delay=missing_session_delay(retry))
    waiting.found(namespace, session_name, name)
    try:
        view = await _stored_session(plane, owner)
    except HistoryLost:
        await refuse_turn(plane.kube, turn_resource, owner)
        return
    if view is None:
        if owner.status is not None and owner.status.phase == "failed":
            await refuse_unopened(plane.kube, turn_resource, owner)  # a refused fork
            return
        raise kopf.TemporaryError(f"Session {session_name} is not admitted yet", delay=1)
    await _admit_turn(plane, turn_resource, view)


async def _admit_turn(plane: ControlPlane, turn_resource: Turn, view: SessionView) -> None:
    """Enqueues the Turn applied with kubectl into its admitted Session ``view``
    (once: keyed by the resource's uid)."""
    meta = turn_resource.metadata
    namespace, name = _namespaced(meta.namespace), str(meta.name)
    spec = turn_resource.spec
    session_id = view.id
    asked_at = datetime.now(UTC)
    try:
        turn = await plane.control.enqueue(
            session_id,
            spec.input,
            idempotency_key=f"k8s:{meta.uid}",
            source=spec.source or TurnSource.KUBERNETES,
        )
    except SessionNotOpen:
        # Never admitted, and never tried again: it ends failed, saying why.
        now = await plane.control.get_session(session_id)
        await refuse_admission(plane.kube, turn_resource, now)
        return
    if plane.traces is not None:
        # The admission began when the Turn resource was created.
        created = (meta.model_extra or {}).get("creationTimestamp")
        requested = datetime.fromisoformat(created) if created else asked_at
        plane.traces.admitted(turn, requested, asked_at=asked_at)
    plane.mirror.turn_names[turn.id] = (namespace, name)
    # Not a status patch from ``turn``: by the time it landed, the status sync
    # could have written the Turn running or completed (see helmr.operator.mirror.custom_resources).
    plane.mirror.request(session_id, turn.id)
    plane.supervisor.wake()


async def _admit_waiting(
    plane: ControlPlane, waiting: WaitingTurns, owner: Session, view: SessionView
) -> None:
    """The Turns applied before ``owner`` was (helmr.operator.kopf.waiting_turns),
    admitted now rather than at kopf's next ask, up to 30 s later; each read again
    first (one deleted meanwhile is not admitted). One Turn's trouble is logged
    and left to kopf's next ask: it stops no other."""
    namespace, session_name = _namespaced(owner.metadata.namespace), str(owner.metadata.name)
    for name, uid in waiting.take(namespace, session_name).items():
        try:
            turn = await plane.kube.get_resource(Turn, namespace, name)
            if turn is None or turn.metadata.uid != uid or _admitted_or_ended(turn):
                continue
            await _admit_turn(plane, turn, view)
        except Exception:
            log.exception("turn %s/%s: admitting it with its Session failed", namespace, name)


def _admitted_or_ended(turn: Turn) -> bool:
    """Admitted by the API (which created it) or ended: never admitted (again)."""
    status = turn.status
    ended = status is not None and status.phase in TERMINAL_TURN_STATUSES
    return ended or LABEL_TURN_ID in (turn.metadata.labels or {})


@kopf.on.resume(GROUP, VERSION, ACTORS)
@kopf.on.create(GROUP, VERSION, ACTORS)
@kopf.on.update(GROUP, VERSION, ACTORS, field="spec")
async def actor_accepted(body: kopf.Body, memo: Any, **_: Any) -> None:
    """Writes the Actor's ``Accepted`` and ``SavesAvailable`` conditions
    (helmr.operator.mirror.actor_acceptance)."""
    await _plane(memo).actor_recheck.check(Actor.from_manifest(body))


@kopf.on.resume(GROUP, VERSION, ACTORS)
@kopf.on.create(GROUP, VERSION, ACTORS)
@kopf.on.update(GROUP, VERSION, ACTORS, field="spec")
async def actor_network_policies(body: kopf.Body, memo: Any, **_: Any) -> None:
    """Writes the NetworkPolicies of the Actor's runner pods as its spec says
    (helmr.operator.runners.network_policies): its ``spec.network`` reaches the pods
    already running, not only the next ones."""
    await _plane(memo).runner_policies.ensure(Actor.from_manifest(body))


@kopf.on.event(GROUP, VERSION, ACTORS)
async def actor_seen(type: str | None, body: kopf.Body, memo: Any, **_: Any) -> None:
    """Keeps the Actors to check again periodically, and the warm pools to keep, up to
    date: a watch event, not a kopf timer, whose finalizer would block deleting Actors
    while no operator runs."""
    actor = Actor.from_manifest(body)
    _plane(memo).actor_recheck.seen(type, actor)
    _plane(memo).warm_pools.seen(type, actor)


# The saves' snapshots (labelled with their version) and every snapshot's content
# (cluster-scoped, unlabelled: the follower passes over those it does not follow).
@kopf.on.event(
    SNAPSHOT_GROUP, SNAPSHOT_VERSION, SNAPSHOTS, labels={LABEL_SAVE_VERSION: kopf.PRESENT}
)
async def save_snapshot_event(type: str | None, body: kopf.Body, memo: Any, **_: Any) -> None:
    """A save just taken is cut as soon as its snapshot or its content says so
    (helmr.operator.disks.snapshot_cuts): its Session's next Turn waits for it."""
    _plane(memo).disks.snapshots.snapshot_event(type, body)


@kopf.on.event(SNAPSHOT_GROUP, SNAPSHOT_VERSION, SNAPSHOT_CONTENTS)
async def snapshot_content_event(type: str | None, body: kopf.Body, memo: Any, **_: Any) -> None:
    _plane(memo).disks.snapshots.content_event(type, body)


# A pooled pod has no Session until adopted (then it is labelled with one): the warm
# pools keep it till then (helmr.operator.runners.warm_pools).
@kopf.on.event("", "v1", "pods", labels={LABEL_COMPONENT: RUNNER, LABEL_SESSION_ID: kopf.PRESENT})
async def runner_pod_event(
    type: str | None, body: kopf.Body, namespace: str | None, memo: Any, **_: Any
) -> None:
    """What a runner pod says (prepared, failed to prepare, ended, gone) goes to
    Control through the supervisor (``Supervisor.pod_reported``), read out of the
    pod here so kopf lets go of it at once (helmr.operator.runners.pod_reports says why)."""
    plane = _plane(memo)
    report = PodReport.read(type, _namespaced(namespace), body)
    if report.deleted:  # its token is refused from now on
        plane.runner_pods.forget(report.session_id, report.epoch)
    else:
        # Gated by a replica that is gone (else followed already): any replica ungates
        # it, the leader-to-be among them.
        claim = gated_claim(body)
        if claim is not None:
            plane.disk_gates.follow(report.namespace, report.name, claim)
    plane.pod_reports.put(report)
