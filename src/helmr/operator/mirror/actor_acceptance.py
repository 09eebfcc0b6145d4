"""Writes Actors' ``Accepted`` condition (:mod:`helmr.operator.mirror.actor_status`
decides it): when an Actor is created or its spec changes (kopf's handlers),
and every minute again for the Actors whose condition can change with no edit
of theirs.

Only ``imagePullPolicy: Never`` makes it change so: whether a node has the
image changes as images are imported into, or removed from, the nodes. That
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
from helmr.operator.mirror.actor_status import accepted
from helmr.operator.mirror.conditions import settle
from helmr.resources import Actor, ActorStatus

RECHECK_SECONDS = 60.0
"""How often the Actors that :func:`changes_alone` names are checked again."""

NodeImages = dict[str, list[list[str]]]

log = logging.getLogger(__name__)


def changes_alone(actor: Actor) -> bool:
    """Whether the Actor's ``Accepted`` condition can change while its spec does not."""
    return actor.spec.image_pull_policy == "Never"


async def read_nodes(kube: Kube) -> tuple[NodeImages | None, str]:
    """The nodes' images; or None and why, when the operator may not list nodes."""
    try:
        return await kube.node_images(), ""
    except KubeError as e:
        return None, f"the operator may not list nodes ({e.status} {e.reason})"


async def write_accepted(kube: Kube, actor: Actor, nodes: NodeImages | None, why: str) -> None:
    """Patches the Actor's status when its ``Accepted`` condition differs from what
    ``nodes`` (the nodes' images, or None: unknown, ``why``) make it."""
    observed = accepted(actor.spec, nodes, why)
    previous = None if actor.status is None else actor.status.conditions
    generation = actor.metadata.generation
    status = ActorStatus(
        conditions=settle(previous, [observed], datetime.now(UTC), generation),
        observed_generation=generation,
    )
    if actor.status is None or actor.status.conditions != status.conditions:
        await kube.patch_resource_status(Actor, *_place(actor), status)


def _place(actor: Actor) -> tuple[str, str]:
    # An Actor read from the apiserver has both (the models allow a manifest without).
    return actor.metadata.namespace or "", actor.metadata.name or ""


async def check(kube: Kube, actor: Actor) -> None:
    """Writes the condition of one Actor, reading the nodes only when it needs them."""
    nodes, why = await read_nodes(kube) if changes_alone(actor) else (None, "")
    await write_accepted(kube, actor, nodes, why)


class ActorRecheck:
    """Checks again, every ``interval`` seconds, the watched Actors whose condition
    can change alone, as last seen (:meth:`seen`, from kopf's watch of Actors)."""

    def __init__(self, kube: Kube, interval: float = RECHECK_SECONDS) -> None:
        self._kube = kube
        self._interval = interval
        self._actors: dict[tuple[str, str], Actor] = {}

    def seen(self, event_type: str | None, actor: Actor) -> None:
        """An Actor's watch event (``type`` None: kopf's initial listing)."""
        key = _place(actor)
        if event_type == "DELETED" or not changes_alone(actor):
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
        """One pass: the nodes are read once; one Actor's failure leaves the others checked."""
        if not self._actors:
            return
        nodes, why = await read_nodes(self._kube)
        for (namespace, name), actor in list(self._actors.items()):
            try:
                await write_accepted(self._kube, actor, nodes, why)
            except Exception:
                log.exception("rechecking Actor %s/%s failed", namespace, name)
