"""The settings a Session's runners get (issue 28): its own (``spec.env``,
``spec.envFrom``), or, for a fork that names neither, its source's.

A fork's object names its source (``spec.forkFrom``), whether the API made it or
a manifest declared it; the source's settings are read from the source's object
when the fork's runner starts (they live in the objects only, never in the
store). A source that is itself a fork naming none is followed in turn; a source
whose object is gone gives none.
"""

from __future__ import annotations

from helmr.operator.runners.backend import ResourceReader
from helmr.resources import Session
from helmr.resources.session_env import SessionEnv

MAX_FORK_DEPTH = 16
"""Sources followed at most: a chain of forks naming no settings, or a manifest
whose ``forkFrom`` names a fork of itself, ends there."""


async def runner_env(resources: ResourceReader, session: Session) -> SessionEnv:
    """The settings the runners of ``session`` get."""
    for _ in range(MAX_FORK_DEPTH):
        own = SessionEnv.of(session.spec.env, session.spec.env_from)
        fork = session.spec.fork_from
        namespace = session.metadata.namespace
        if own or fork is None or namespace is None:
            return own
        source = await resources.get_resource(Session, namespace, fork.session)
        if source is None:
            return own
        session = source
    return SessionEnv()
