"""A control plane that comes back without its store: nothing is replayed.

Issue 9 item 8. The demo kept its timeline on an emptyDir; after the control
plane's pod was deleted, the Session resource was admitted again under a new
id and its completed Turns ran again. spec/000: "Helmr never replays a
completed, interrupted or failed Turn". A Session whose resource shows it was
admitted (``status.sessionId``) but whose history the store no longer has ends
``failed`` with reason ``history_lost`` (its status and a Warning Event), and a
Turn applied for it afterwards is refused with the same reason
(docs/semantics.md, "A lost store").

The shared operator is stopped, a new one starts with an empty data directory
against the same namespaces, and the shared one is started again afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client

from helmr.client import Client
from helmr.errors import NotFound
from helmr.resources import GROUP, SESSIONS, TURNS, VERSION

from .conftest import Operator
from .sessions import create_actor, eventually, start_session


def session_cr(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Session",
        "metadata": {"name": name},
        "spec": {"actorRef": {"name": "echo"}, "workspace": name},
    }


def turn_cr(name: str, session: str, input: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Turn",
        "metadata": {"name": name},
        "spec": {"sessionRef": {"name": session}, "input": input},
    }


class Objects:
    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    def create(self, plural: str, body: dict[str, Any]) -> None:
        self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)

    def status(self, plural: str, name: str) -> dict[str, Any]:
        obj = cast(
            dict[str, Any],
            self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name),
        )
        return cast(dict[str, Any], obj.get("status") or {})

    def phase_is(self, plural: str, name: str, phase: str) -> dict[str, Any] | None:
        status = self.status(plural, name)
        return status if status.get("phase") == phase else None


def failed_condition(status: dict[str, Any]) -> dict[str, Any]:
    [failed] = [c for c in status.get("conditions") or [] if c["type"] == "Failed"]
    return cast(dict[str, Any], failed)


def warnings(core: client.CoreV1Api, namespace: str, kind: str, name: str) -> list[str | None]:
    listed = core.list_namespaced_event(namespace)
    return [
        e.reason
        for e in listed.items
        if e.involved_object.kind == kind and e.involved_object.name == name and e.type == "Warning"
    ]


@pytest.mark.timeout(600)
async def test_a_control_plane_without_its_store_replays_nothing_and_fails_the_lost_session(
    operator: Operator,
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
    tmp_path: Path,
) -> None:
    create_actor(api_client, namespace, runner_image)
    objects = Objects(client.CustomObjectsApi(api_client), namespace)
    # A Session and its Turns applied with kubectl (the demo's way) ...
    objects.create(SESSIONS, session_cr("demo"))
    for i in (1, 2):
        objects.create(TURNS, turn_cr(f"demo-{i}", "demo", f"turn {i}"))
    # ... and one opened through the API, with a Turn.
    async with Client(operator.url, operator.token) as helmr:
        api_session = await start_session(helmr, namespace)
        done = await (await api_session.enqueue("api turn")).wait(timeout=180)
        assert done.status == "completed"
        api_view = await api_session.retrieve()
    before = {}
    for i in (1, 2):
        name = f"demo-{i}"
        before[name] = await eventually(
            lambda name=name: objects.phase_is(TURNS, name, "completed"),
            timeout=180,
            what=f"{name} completed",
        )
    demo_id = await eventually(
        lambda: objects.status(SESSIONS, "demo").get("sessionId"), what="demo admitted"
    )
    await eventually(
        lambda: objects.status(SESSIONS, api_view.name).get("sessionId"), what="api mirrored"
    )

    operator.stop()
    fresh = Operator.for_cluster(
        kubeconfig, tmp_path, HELMR_RECONCILE_INTERVAL="0.5", HELMR_STOP_GRACE_SECONDS="3"
    )
    try:
        fresh.start()
        # The lost Sessions fail with history_lost, keeping the id they had.
        for name, session_id in (("demo", demo_id), (api_view.name, api_view.id)):
            status = await eventually(
                lambda name=name: objects.phase_is(SESSIONS, name, "failed"),
                what=f"{name} failed",
            )
            assert status["sessionId"] == session_id
            failed = failed_condition(status)
            assert (failed["status"], failed["reason"]) == ("True", "HistoryLost")
            assert "history was lost" in failed["message"]
            assert "HistoryLost" in await eventually(
                lambda name=name: warnings(core, namespace, "Session", name),
                what=f"the {name} Event",
            )
        # A new Turn for it is refused with the same reason.
        objects.create(TURNS, turn_cr("demo-3", "demo", "after the loss"))
        refused = await eventually(
            lambda: objects.phase_is(TURNS, "demo-3", "failed"), what="demo-3 refused"
        )
        assert refused["reason"] == "history_lost"
        assert refused["error"]["code"] == "history_lost"
        assert failed_condition(refused)["reason"] == "HistoryLost"
        assert "HistoryLost" in await eventually(
            lambda: warnings(core, namespace, "Turn", "demo-3"), what="the demo-3 Event"
        )
        # Nothing was replayed: the completed Turns keep their outcome, and the
        # store opened no Session for them (in particular none under a new id).
        for name, status in before.items():
            after = objects.status(TURNS, name)
            assert (after["phase"], after["turnId"], after["sequence"]) == (
                "completed",
                status["turnId"],
                status["sequence"],
            )
        async with Client(fresh.url, fresh.token) as helmr:
            for session_id in (demo_id, api_view.id):
                with pytest.raises(NotFound):
                    await helmr.sessions.ref(session_id).retrieve()
    finally:
        fresh.stop()
        operator.start()  # leave the shared operator running for the next test
