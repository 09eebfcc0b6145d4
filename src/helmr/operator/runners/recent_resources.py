"""The Session, Workspace and Actor resources a start needs, without reading or making
what this process holds.

A new Session's first start is on its first Turn's path: started at the Turn's
admission, it read the Session's and its Actor's resources (two GETs at once) before
anything else, 25-100 ms on a loaded node (benchmarks/results.md, 4 December), when
this process had both already: the Session's resource is the one its API just created
(:meth:`RecentResources.created`, kept by the Session's id and taken once, by its first
start), and the Actor the one kopf's watch last delivered to the warm pools (an Actor
with a pool is watched there). Either missing (a Session applied with kubectl, a
restart, an Actor without a pool), it is read as before.

The Session's Workspace, when the API made it beside the Session's resource (its store
state reset then), is kept with it: a pooled start adopts on it, neither making nor
reading it (its POST was the longest step of that path, 16-56 ms). Missing (made
before, by a user or another replica's API), the start makes or reads it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from helmr.control import SessionView
from helmr.operator.runners.backend import ResourceReader
from helmr.resources import Actor, Session, Workspace

KEPT_SESSIONS = 1024
"""Created Session resources kept for their first start at most (one whose start never
comes, its Session closed first, or started by another replica, is dropped, oldest
first)."""
KEPT_SECONDS = 5.0
"""How long after its creation a Session's resource is taken for its start unread: a
client enqueues its first Turn at once, and a resource kept longer may have been edited
since (its start then reads the edit)."""

Key = tuple[str, str]


def _unwatched(key: Key) -> None:
    return None


class RecentResources:
    def __init__(
        self,
        reader: ResourceReader,
        watched_actor: Callable[[Key], Actor | None] = _unwatched,
        most: int = KEPT_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``watched_actor``: an Actor as kopf's watch last delivered it, if it is
        watched (``WarmPools.watched``)."""
        self._reader = reader
        self._watched_actor = watched_actor
        self._most = most
        self._clock = clock
        # By the Session's id, not its name: a name may be taken again by another.
        self._created: OrderedDict[str, tuple[float, Session, Workspace | None]] = OrderedDict()

    def created(self, session_id: str, resource: Session, workspace: Workspace | None) -> None:
        """This process's API created the Session's ``resource`` (the mirror's), and its
        ``workspace`` with it (None: it did not make one): its first start takes them."""
        self._created[session_id] = (self._clock(), resource, workspace)
        while len(self._created) > self._most:
            self._created.popitem(last=False)

    async def session(self, session: SessionView) -> tuple[Session | None, Workspace | None]:
        """The Session's resource: the one created just now (once), else read; and its
        Workspace if it was made with it (else None)."""
        created = self._created.pop(session.id, None)
        if created is not None and self._clock() - created[0] <= KEPT_SECONDS:
            return created[1], created[2]
        return await self._reader.get_resource(Session, session.namespace, session.name), None

    async def actor(self, session: SessionView) -> Actor | None:
        """The Session's Actor: as watched, else read."""
        watched = self._watched_actor((session.namespace, session.actor))
        if watched is not None:
            return watched
        return await self._reader.get_resource(Actor, session.namespace, session.actor)
