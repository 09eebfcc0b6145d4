"""Runner pods and Actors as the apiserver has them, followed on threads of their own
(the egress proxy's directory: :mod:`helmr.egress.directory`).

Each follower lists, hands the listing over whole, then watches from it and hands
over each change; when the watch ends (its timeout, a 410 Gone, a lost connection)
it lists again. The proxy needs ``list`` and ``watch`` on pods and Actors, nothing
else (the chart's egress-proxy RBAC).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kubernetes import client, watch

from helmr.kube.client import load_config
from helmr.kube.labels import LABEL_COMPONENT, RUNNER
from helmr.resources import ACTORS, GROUP, VERSION

log = logging.getLogger(__name__)

WATCH_SECONDS = 300
RETRY_SECONDS = 1.0


class Follower(Protocol):
    """Where listings and changes go."""

    def pods_listed(self, namespace: str | None, pods: Iterable[dict[str, Any]]) -> None: ...
    def pod_changed(self, event: str, pod: dict[str, Any]) -> None: ...
    def actors_listed(self, namespace: str | None, actors: Iterable[dict[str, Any]]) -> None: ...
    def actor_changed(self, event: str, actor: dict[str, Any]) -> None: ...


def follow_runners(follower: Follower, namespaces: tuple[str, ...]) -> None:
    """Starts following runner pods and Actors in ``namespaces`` (empty: all), two
    daemon threads per namespace (or two in all)."""
    api = load_config()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    runners = f"{LABEL_COMPONENT}={RUNNER}"
    actors_of = {"group": GROUP, "version": VERSION, "plural": ACTORS}
    for namespace in namespaces or (None,):
        if namespace is None:
            pods = _bound(core.list_pod_for_all_namespaces)
            actors = _bound(custom.list_cluster_custom_object, **actors_of)
        else:
            pods = _bound(core.list_namespaced_pod, namespace)
            actors = _bound(custom.list_namespaced_custom_object, namespace=namespace, **actors_of)
        for name, lister, listed, changed, selector in (
            ("pods", pods, follower.pods_listed, follower.pod_changed, runners),
            ("actors", actors, follower.actors_listed, follower.actor_changed, None),
        ):
            threading.Thread(
                target=_follow,
                args=(lister, namespace, listed, changed, selector),
                name=f"watch-{name}-{namespace or 'all'}",
                daemon=True,
            ).start()


def _bound(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
    """``call`` with its leading arguments given, as the watch expects a list call.
    Unannotated, so that the watch hands over each object as JSON (``raw_object``),
    not as the client's models."""

    def bound(**more):  # type: ignore[no-untyped-def]
        return call(*args, **kwargs, **more)

    return bound


def _follow(
    lister: Callable[..., Any],
    namespace: str | None,
    listed: Callable[[str | None, Iterable[dict[str, Any]]], None],
    changed: Callable[[str, dict[str, Any]], None],
    selector: str | None,
) -> None:
    selecting = {"label_selector": selector} if selector else {}
    while True:
        try:
            listing = json.loads(lister(_preload_content=False, **selecting).data)
            listed(namespace, listing.get("items") or [])
            for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                lister,
                resource_version=listing["metadata"]["resourceVersion"],
                timeout_seconds=WATCH_SECONDS,
                **selecting,
            ):
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    changed(event["type"], event["raw_object"])
        except Exception:  # a lost connection, 410 Gone: list again
            log.warning("watch of %s ended; listing again", namespace or "all", exc_info=True)
            time.sleep(RETRY_SECONDS)
