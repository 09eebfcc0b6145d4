"""Mirrors the store's state into the custom resources, and back.

The store is the authority (a state change and its events commit together);
CRs are the live face users `kubectl get`. This module:

- creates the Session and Turn CRs of what the REST API admitted (the
  server's ``Mirror``), labelled with their store ids so the operator's
  handlers know they are admitted already;
- writes each CR's ``.status`` from the store's view (idempotent merge
  patches, so repeating one after a restart is harmless);
- records Kubernetes Events on the CRs for lifecycle changes.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes.client.exceptions import ApiException

from helmr.control import SessionView, TurnView
from helmr.events import Event
from helmr.operator.kube import Kube
from helmr.resources import API_VERSION, SESSIONS, TURNS

log = logging.getLogger(__name__)

LABEL_SESSION_ID = "helmr.dev/session-id"
LABEL_TURN_ID = "helmr.dev/turn-id"


def turn_cr_name(turn_id: str) -> str:
    """The CR name of an API-created Turn: its id, as a DNS-1123 name."""
    return turn_id.lower().replace("_", "-")


def _time(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def session_status(view: SessionView, runner_pod: str | None) -> dict[str, Any]:
    hold = None if view.hold is None else {"holdId": view.hold.hold_id, "reason": view.hold.reason}
    return {
        "sessionId": view.id,
        "phase": view.status,
        "hold": hold,
        "cancelRequestedAt": _time(view.cancel_requested_at),
        "consecutiveProcessFailures": view.consecutive_failures,
        "processEpoch": view.process_epoch,
        "runnerPod": runner_pod,
        "activeTurn": view.active_turn_id,
        "queuedTurns": view.queued_turns,
        "closedHow": view.closed_how,
    }


def turn_status(view: TurnView) -> dict[str, Any]:
    status: dict[str, Any] = {
        "turnId": view.id,
        "phase": view.status,
        "sequence": view.sequence,
        "createdAt": _time(view.created_at),
        "startedAt": _time(view.started_at),
        "endedAt": _time(view.ended_at),
        "hasResult": view.has_result,
        "reason": view.reason,
        "processEpoch": view.epoch,
        "error": None if view.error is None else view.error.model_dump(),
    }
    if view.has_result:
        status["result"] = view.result
    if view.has_response:
        status["response"] = view.response
    return status


class CustomResourceMirror:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # Turn id → CR name for Turns applied with kubectl (API-created Turns
        # are named after their id). Rebuilt on restart by the resume handler.
        self.turn_names: dict[str, tuple[str, str]] = {}
        # Session CR uids, for the owner references of the Turns the API creates.
        self._session_uids: dict[str, str] = {}
        # The last status written per session, to skip patches that change nothing.
        self._session_statuses: dict[str, dict[str, Any]] = {}

    # --- the server's Mirror: objects for what the API admitted

    async def session_started(self, session: SessionView) -> None:
        body = {
            "apiVersion": API_VERSION,
            "kind": "Session",
            "metadata": {
                "name": session.name,
                "namespace": session.namespace,
                "labels": {LABEL_SESSION_ID: session.id},
            },
            "spec": {
                "actorRef": {"name": session.actor},
                "workspace": session.workspace,
                **({"key": session.key} if session.key else {}),
            },
        }
        created = await self._create_if_absent(session.namespace, SESSIONS, body)
        if created is not None:
            self._session_uids[session.id] = created["metadata"]["uid"]
        await self.sync_session(session, runner_pod=None)

    async def turn_enqueued(self, session: SessionView, turn: TurnView) -> None:
        body = {
            "apiVersion": API_VERSION,
            "kind": "Turn",
            "metadata": {
                "name": turn_cr_name(turn.id),
                "namespace": session.namespace,
                "labels": {LABEL_SESSION_ID: session.id, LABEL_TURN_ID: turn.id},
                # Owned by its Session: deleting the Session collects its Turns.
                "ownerReferences": await self._owner(session),
            },
            "spec": {
                "sessionRef": {"name": session.name},
                "input": turn.input,
                "source": turn.source,
                **({"idempotencyKey": turn.idempotency_key} if turn.idempotency_key else {}),
            },
        }
        await self._create_if_absent(session.namespace, TURNS, body)
        await self.sync_turn(session, turn)

    async def _create_if_absent(
        self, namespace: str, plural: str, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The created object, or None when it existed already."""
        try:
            return await self.kube.create_custom(namespace, plural, body)
        except ApiException as e:
            if e.status != 409:
                raise
        return None

    async def _owner(self, session: SessionView) -> list[dict[str, Any]]:
        uid = self._session_uids.get(session.id)
        if uid is None:
            cr = await self.kube.get_custom(session.namespace, SESSIONS, session.name)
            if cr is None:
                return []
            uid = self._session_uids[session.id] = cr["metadata"]["uid"]
        return [{"apiVersion": API_VERSION, "kind": "Session", "name": session.name, "uid": uid}]

    # --- status

    async def sync_session(self, view: SessionView, runner_pod: str | None) -> None:
        status = session_status(view, runner_pod)
        # Output streams touch the session on every write; its status rarely changes.
        if self._session_statuses.get(view.id) == status:
            return
        if await self.kube.patch_status(view.namespace, SESSIONS, view.name, {"status": status}):
            self._session_statuses[view.id] = status

    async def sync_turn(self, session: SessionView, view: TurnView) -> None:
        namespace, name = self.turn_names.get(view.id, (session.namespace, turn_cr_name(view.id)))
        await self.kube.patch_status(namespace, TURNS, name, {"status": turn_status(view)})

    async def record(self, session: SessionView, event: Event, *, warning: bool) -> None:
        """A Kubernetes Event on the Session CR, so `kubectl describe` tells the story."""
        involved = {
            "apiVersion": API_VERSION,
            "kind": "Session",
            "metadata": {"name": session.name, "namespace": session.namespace},
        }
        reason = "".join(part.title() for part in event.kind.replace(".", "_").split("_"))
        detail = f" turn {event.turn_id}" if event.turn_id else ""
        await self.kube.record_event(
            involved, reason, f"{event.kind}{detail}: {event.data}"[:1024], warning=warning
        )
