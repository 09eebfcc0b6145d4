"""Writes Actors' conditions: ``Accepted`` (:mod:`helmr.operator.mirror.actor_status`
decides it) and ``SavesAvailable`` (whether the cluster can save their Sessions'
Computer disks, :mod:`helmr.operator.disks.save_support`): when an Actor is
created or its spec changes (kopf's handlers), and every minute again, since
both can change with no edit of the Actor's.

``Accepted`` changes so only with ``imagePullPolicy: Never``: whether a node
has the image changes as images are imported into, or removed from, the nodes
(the nodes are read only for those). ``SavesAvailable`` changes as snapshot
classes, or the VolumeSnapshot API itself, are installed or removed. The
recheck is a task of the leader's work (:class:`ActorRecheck`), not a kopf
timer: kopf puts its finalizer on every object a timer or daemon watches, and
that finalizer blocks deleting the Actor, and its namespace, whenever no
operator runs (stopped or uninstalled). Nothing must happen before an Actor
goes, so nothing may hold it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from helmr.kube.client import Kube
from helmr.kube.errors import KubeError
from helmr.operator.disks.save_support import SaveSupport, Verdict
from helmr.operator.mirror.actor_status import accepted, saves_available
from helmr.operator.mirror.conditions import settle
from helmr.resources import Actor, ActorStatus

RECHECK_SECONDS = 60.0
"""How often every Actor's conditions are checked again."""

NodeImages = dict[str, list[list[str]]]

log = logging.getLogger(__name__)


def needs_nodes(actor: Actor) -> bool:
    """Whether the Actor's ``Accepted`` condition depends on the nodes' images."""
    return actor.spec.image_pull_policy == "Never"


async def read_nodes(kube: Kube) -> tuple[NodeImages | None, str]:
    """The nodes' images; or None and why, when the operator may not list nodes."""
    try:
        return await kube.node_images(), ""
    except KubeError as e:
        return None, f"the operator may not list nodes ({e.status} {e.reason})"


async def write_conditions(
    kube: Kube, actor: Actor, nodes: NodeImages | None, why: str, saves: Verdict
) -> None:
    """Patches the Actor's status when its conditions differ from what ``nodes`` (the
    nodes' images, or None: unknown, ``why``) and ``saves`` make them."""
    observed = [accepted(actor.spec, nodes, why), saves_available(saves)]
    previous = None if actor.status is None else actor.status.conditions
    generation = actor.metadata.generation
    status = ActorStatus(
        conditions=settle(previous, observed, datetime.now(UTC), generation),
        observed_generation=generation,
    )
    if actor.status is None or actor.status.conditions != status.conditions:
        await kube.patch_resource_status(Actor, *_place(actor), status)


def _place(actor: Actor) -> tuple[str, str]:
    # An Actor read from the apiserver has both (the models allow a manifest without).
    return actor.metadata.namespace or "", actor.metadata.name or ""


class ActorRecheck:
    """Writes an Actor's conditions (:meth:`check`), and checks every watched Actor
    again every ``interval`` seconds, as last seen (:meth:`seen`, from kopf's
    watch of Actors)."""

    def __init__(
        self, kube: Kube, save_support: SaveSupport, interval: float = RECHECK_SECONDS
    ) -> None:
        self._kube = kube
        self._save_support = save_support
        self._interval = interval
        self._actors: dict[tuple[str, str], Actor] = {}

    async def check(self, actor: Actor) -> None:
        """Writes the conditions of one Actor, reading the nodes only when it needs them."""
        nodes, why = await read_nodes(self._kube) if needs_nodes(actor) else (None, "")
        await self._write(actor, nodes, why)

    def seen(self, event_type: str | None, actor: Actor) -> None:
        """An Actor's watch event (``type`` None: kopf's initial listing)."""
        key = _place(actor)
        if event_type == "DELETED":
            self._actors.pop(key, None)
        else:
            self._actors[key] = actor

    async def run(self) -> None:
        """Never raises: it runs beside the rest of the leader's work."""
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.recheck()
            except Exception:
                log.exception("rechecking Actors failed; retrying")

    async def recheck(self) -> None:
        """One pass: the nodes are read once, if any Actor needs them; one Actor's
        failure leaves the others checked."""
        actors = list(self._actors.items())
        nodes: NodeImages | None = None
        why = ""
        if any(needs_nodes(actor) for _, actor in actors):
            nodes, why = await read_nodes(self._kube)
        for (namespace, name), actor in actors:
            try:
                await self._write(actor, nodes if needs_nodes(actor) else None, why)
            except Exception:
                log.exception("rechecking Actor %s/%s failed", namespace, name)

    async def _write(self, actor: Actor, nodes: NodeImages | None, why: str) -> None:
        saves = await self._save_support.verdict(actor.spec.computer)
        await write_conditions(self._kube, actor, nodes, why, saves)
