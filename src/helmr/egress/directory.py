"""Who a connection comes from: runner pods by address, and their Actors' allowances.

Kept by watches of the apiserver (:mod:`helmr.kube.runner_watch`) on threads of
their own; read by the proxy's connection threads. A runner pod's first request may
come before the watch has told of the pod: :meth:`Directory.allowance` waits a
moment for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from helmr.egress.allowlist import NOTHING, Allowance, Refused
from helmr.errors import InvalidInput
from helmr.kube.labels import LABEL_ACTOR
from helmr.resources import Actor

log = logging.getLogger(__name__)

ARRIVAL_SECONDS = 5.0
"""How long a request from an address no runner pod has yet waits for the watch."""


@dataclass(frozen=True, slots=True)
class RunnerPod:
    uid: str
    namespace: str
    actor: str


def _runner_pod(pod: dict[str, Any]) -> tuple[str, RunnerPod] | None:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    address, actor = status.get("podIP"), (meta.get("labels") or {}).get(LABEL_ACTOR)
    if not address or not actor or status.get("phase") in ("Succeeded", "Failed"):
        return None
    return address, RunnerPod(meta.get("uid", ""), meta.get("namespace", ""), actor)


def _allowance(actor: dict[str, Any]) -> tuple[tuple[str, str], Allowance]:
    meta = actor.get("metadata") or {}
    key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
    try:
        parsed = Actor.from_manifest(actor)
    except InvalidInput:
        # One Actor the model cannot read (written before a field's rules tightened,
        # say) allows nothing, and stalls no other.
        log.warning("Actor %s/%s unreadable: its runners may reach nothing", *key, exc_info=True)
        return key, NOTHING
    return key, Allowance.of(parsed.spec.network)


class Directory:
    """Runner pods by address, Actors' allowances by (namespace, name)."""

    def __init__(self, scopes: int) -> None:
        """``scopes``: how many listings (pods and Actors, per namespace) make it whole."""
        self._changed = threading.Condition()
        self._pods: dict[str, RunnerPod] = {}
        self._allowances: dict[tuple[str, str], Allowance] = {}
        self._unlisted = scopes

    # --- written by the watches

    def pods_listed(self, namespace: str | None, pods: Iterable[dict[str, Any]]) -> None:
        """All runner pods of ``namespace`` (None: every namespace), as listed."""
        with self._changed:
            self._pods = {
                ip: pod
                for ip, pod in self._pods.items()
                if namespace is not None and pod.namespace != namespace
            }
            self._pods.update(found for p in pods if (found := _runner_pod(p)) is not None)
            self._listed()

    def pod_changed(self, event: str, pod: dict[str, Any]) -> None:
        found = _runner_pod(pod)
        uid = (pod.get("metadata") or {}).get("uid")
        with self._changed:
            # An address is reused: forget it only for the pod that had it.
            for ip, known in list(self._pods.items()):
                if known.uid == uid:
                    del self._pods[ip]
            if found is not None and event != "DELETED":
                self._pods[found[0]] = found[1]
            self._changed.notify_all()

    def actors_listed(self, namespace: str | None, actors: Iterable[dict[str, Any]]) -> None:
        with self._changed:
            self._allowances = {
                key: allowed
                for key, allowed in self._allowances.items()
                if namespace is not None and key[0] != namespace
            }
            self._allowances.update(_allowance(actor) for actor in actors)
            self._listed()

    def actor_changed(self, event: str, actor: dict[str, Any]) -> None:
        key, allowed = _allowance(actor)
        with self._changed:
            if event == "DELETED":
                self._allowances.pop(key, None)
            else:
                self._allowances[key] = allowed
            self._changed.notify_all()

    def _listed(self) -> None:
        self._unlisted = max(0, self._unlisted - 1)
        self._changed.notify_all()

    # --- read by the proxy

    def allowance(self, address: str, wait: float | None = None) -> tuple[str, Allowance]:
        """The Actor (``namespace/name``) of the runner pod at ``address`` and what it
        allows; refuses a client that is no runner pod (after ``wait`` seconds, by
        default :data:`ARRIVAL_SECONDS`)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._unlisted == 0 and address in self._pods,
                timeout=ARRIVAL_SECONDS if wait is None else wait,
            )
            pod = self._pods.get(address)
            if pod is None:
                raise Refused(f"{address} is not a runner pod of an Actor this proxy serves")
            actor = f"{pod.namespace}/{pod.actor}"
            return actor, self._allowances.get((pod.namespace, pod.actor), NOTHING)
