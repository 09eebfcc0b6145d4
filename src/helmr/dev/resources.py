"""The resources the supervisor reads (:class:`~helmr.operator.runners.backend.ResourceReader`)
without an apiserver: the one Actor ``helmr dev`` runs, and the Sessions the API opened.

On a cluster a Session the API opened gets its resource from the status mirror,
and the supervisor reads it for the Session's own limit overrides; here the API is
the only way in, so a Session has none and its resource is the store's Session
as such (its uid the Session's id).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from helmr.dev.actor_source import ActorSource
from helmr.resources import Actor, Resource, Session
from helmr.resources.base import ObjectMeta
from helmr.resources.session import ActorRef, SessionSpec

R = TypeVar("R", bound=Resource[Any, Any])


class DevResources:
    def __init__(self, source: Callable[[], ActorSource]) -> None:
        """``source``: the actor as it is on disk now (its manifest may change)."""
        self._source = source

    async def get_resource(self, kind: type[R], namespace: str, name: str) -> R | None:
        actor = self._source().actor
        if kind is Actor:
            found = actor.metadata.namespace == namespace and actor.metadata.name == name
            return cast(R, actor) if found else None
        if kind is Session:
            meta = ObjectMeta(name=name, namespace=namespace, uid=name)
            # Only its overrides (none) and uid are read: the Actor and Workspace
            # the store holds for it are not asked again.
            spec = SessionSpec(actor_ref=ActorRef(name=actor.metadata.name or ""), workspace=name)
            return cast(R, Session(metadata=meta, spec=spec))
        return None
