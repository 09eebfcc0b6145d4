"""Namespaces that kopf learns of by listing are served too, not only those it
learns of by a watch event.

Served by namespace patterns (``kopf run --namespace 'team-*'``), kopf lists
the namespaces once at its start, then watches them; the watch begins with a
listing of its own, and again after every reconnect that cannot resume (410
Gone, a failed listing). kopf's handler of those listings ignores them
(``kopf._core.reactor.observation.process_discovered_namespace_event``: "the
initial listing" is said to have been read already). A namespace created
between the first listing and a later one is therefore in no listing kopf
reads and in no event it gets: its Actors, Sessions and Turns go unserved
until the namespace itself changes. On a loaded node, kopf's second listing
came seconds after its first (every watch of every served namespace starts
in between), and a Session created in that window waited for its namespace's
deletion, five minutes later, to be admitted.

Reading a listed namespace is what kopf does with a watched one (it only adds
or drops a name and wakes kopf's orchestrator, which starts or stops the
per-namespace watches to match), so every listing is read.
``tests/unit/operator/test_kopf_namespaces.py`` fails if kopf's own handler
starts reading listings, so that this can then be removed.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from kopf._cogs.structs import bodies, references
from kopf._core.reactor import observation

KOPF_HANDLER = observation.process_discovered_namespace_event
"""kopf's own handler, which :func:`install` replaces."""

log = logging.getLogger(__name__)


async def observe_namespace(
    *,
    raw_event: bodies.RawEvent,
    namespaces: Collection[references.NamespacePattern],
    insights: references.Insights,
    **_: Any,
) -> None:
    """kopf's namespace-event handler, for listed namespaces (``type`` None) too."""
    async with insights.revised:
        before = set(insights.namespaces)
        observation.revise_namespaces(
            raw_events=[raw_event], insights=insights, namespaces=namespaces
        )
        insights.revised.notify_all()
    # When a namespace began to be served, and whether only a listing showed it
    # (what kopf alone would have missed), is what tells a slow admission apart.
    seen = "listing" if raw_event["type"] is None else "watch event"
    for namespace in insights.namespaces - before:
        log.info("serving namespace %s (seen in a %s)", namespace, seen)
    for namespace in before - insights.namespaces:
        log.info("no longer serving namespace %s (seen in a %s)", namespace, seen)


def install() -> None:
    """Makes kopf's namespace observer, which looks its handler up when it starts
    watching, read listings too; before ``kopf run`` starts its observers."""
    observation.process_discovered_namespace_event = observe_namespace
