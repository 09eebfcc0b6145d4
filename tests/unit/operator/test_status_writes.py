"""Resource statuses end as the store ends (issue 9, item 7a): a status written
from a view taken before the Turn ran never lands after the status sync's
newer one, and a status asked for is written without waiting for a change."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest

from helmr.control import SessionView
from helmr.operator.kopf import handlers
from helmr.operator.kopf.waiting_turns import WaitingTurns
from helmr.operator.mirror.custom_resources import (
    CustomResourceMirror,
    session_manifest,
    session_status,
    turn_cr_name,
)
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import API_VERSION, Resource, Session, Turn, TurnStatus
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube

KUBECTL_TURN = "by-kubectl"


class SlowKube(StubKube):
    """A Kube whose status patches of a queued Turn wait for ``release`` (an apiserver
    slower than the runner), and whose Turn resources exist once ``created``."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.written = asyncio.Event()
        self.created = {KUBECTL_TURN}
        self.sessions: dict[str, Session] = {}
        self.turns: dict[str, Turn] = {}

    async def patch_resource_status(
        self, kind: type[Resource[Any, Any]], namespace: str, name: str, status: Any
    ) -> bool:
        if isinstance(status, TurnStatus):
            if name not in self.created:
                return False  # 404: the API has not created it yet
            if status.phase == "queued":
                await self.release.wait()
        written = await super().patch_resource_status(kind, namespace, name, status)
        self.written.set()
        return written

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        if kind is Session:
            return self.sessions.get(name)
        return self.turns.get(name) if kind is Turn else None

    async def create_resource(self, resource: Any) -> Any:
        self.created.add(resource.metadata.name)
        return None  # "existed already": no owner reference to remember

    def turn_phase(self, name: str) -> str | None:
        status = self.statuses.get(("Turn", name))
        assert status is None or isinstance(status, TurnStatus)
        return None if status is None else status.phase


def mirroring(h: Harness) -> tuple[SlowKube, CustomResourceMirror, StatusSync]:
    kube = SlowKube()
    mirror = CustomResourceMirror(kube)
    return kube, mirror, StatusSync(h.control, mirror, OperatorMetrics(), wake=lambda changed: None)


def admitted_session(kube: SlowKube, view: SessionView) -> None:
    """The Session resource as the operator left it: admitted, its id in the status."""
    session = session_manifest(view)
    session.status = session_status(view, runner_pod=None)
    kube.sessions[view.name] = session


async def admit_kubectl_turn(
    h: Harness,
    kube: SlowKube,
    mirror: CustomResourceMirror,
    namespace: str,
    session_name: str,
    status: TurnStatus | None = None,
    retry: int = 0,
    waiting: WaitingTurns | None = None,
) -> None:
    """The operator's ``turn_admit`` for a Turn applied with kubectl (its ``status``, as
    the resource has it when the operator resumes it after a restart; ``retry``, kopf's
    count of its earlier tries; ``waiting``, the operator's Turns waiting for their
    Sessions). The Turn is in ``kube`` from then on."""
    plane = SimpleNamespace(
        kube=kube,
        control=h.control,
        mirror=mirror,
        supervisor=SimpleNamespace(wake=lambda: None),
        traces=None,  # tracing off (helmr.operator.telemetry.turn_traces)
    )
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Turn",
        "metadata": {"name": KUBECTL_TURN, "namespace": namespace, "uid": "u-1"},
        "spec": {"sessionRef": {"name": session_name}, "input": {"from": "kubectl"}},
    }
    if status is not None:
        body["status"] = status.to_wire()
    kube.turns[KUBECTL_TURN] = Turn.from_manifest(body)
    # kopf types its decorated handlers as its own callback protocol.
    turn_admit = cast(Callable[..., Coroutine[Any, Any, None]], handlers.turn_admit)
    await turn_admit(
        body=body,
        name=KUBECTL_TURN,
        namespace=namespace,
        uid="u-1",
        memo={"control_plane": plane, "waiting_turns": waiting or WaitingTurns()},
        retry=retry,
    )


async def test_a_kubectl_turn_that_ran_before_its_admission_finished_ends_completed(
    h: Harness,
) -> None:
    kube, mirror, sync = mirroring(h)
    session = await h.session()
    admitted_session(kube, session)
    epoch = await h.control.process_started(session.id)

    admission = asyncio.create_task(
        admit_kubectl_turn(h, kube, mirror, session.namespace, session.name)
    )
    # The idle runner's receive wakes on the admission's commit, and the Turn runs
    # and completes while the admission is still writing what it saw: "queued".
    turn = await h.control.receive(session.id, epoch, timeout=5)
    assert turn is not None
    await h.control.complete(session.id, epoch, turn.id, {"echo": "kubectl"})
    await sync.sync(await h.control.changed_sessions(timeout=0))
    assert kube.turn_phase(KUBECTL_TURN) == "completed"
    kube.release.set()
    await admission
    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert kube.turn_phase(KUBECTL_TURN) == "completed"


async def test_an_api_turn_that_ran_before_its_resource_was_created_ends_completed(
    h: Harness,
) -> None:
    kube, mirror, sync = mirroring(h)
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id)
    await sync.sync(await h.control.changed_sessions(timeout=0))  # every Turn patch: 404
    name = turn_cr_name(turn.id)
    assert kube.turn_phase(name) is None
    kube.release.set()

    # The API's mirror creates the resource with the view it had at admission.
    queued = turn.model_copy(update={"status": "queued"})
    await mirror.turn_enqueued(session, queued)
    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert kube.turn_phase(name) == "completed"


async def test_a_status_asked_for_is_written_without_waiting_for_a_change(h: Harness) -> None:
    kube, mirror, sync = mirroring(h)
    session = await h.session()
    await h.control.changed_sessions(timeout=0)  # nothing left in the change feed
    running = asyncio.create_task(sync.run())
    try:
        await asyncio.sleep(0.1)  # the sync now waits on an empty feed (5 s)
        mirror.request(session.id)
        await asyncio.wait_for(kube.written.wait(), 2)
        assert ("Session", session.name) in kube.statuses
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


async def test_a_kubectl_turn_is_admitted_before_its_api_made_session_shows_its_id(
    h: Harness,
) -> None:
    kube, mirror, _ = mirroring(h)
    session = await h.session()
    kube.sessions[session.name] = session_manifest(session)  # labelled, no status yet
    # The same label on a Session resource elsewhere names no session of its own.
    forged = session_manifest(session)
    forged.metadata.namespace = "elsewhere"
    kube.sessions["forged"] = forged

    await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name)
    with pytest.raises(kopf.TemporaryError):
        await admit_kubectl_turn(h, kube, mirror, "elsewhere", "forged")

    assert (await h.control.get_session(session.id)).queued_turns == 1


async def test_an_api_turn_wakes_the_supervisor_before_its_resource_is_made(h: Harness) -> None:
    """A runner pod starts as soon as the API admits a Turn: the supervisor waits
    neither for the Turn's resource nor for the status sync's next pass."""
    kube = SlowKube()
    resources_when_woken: list[set[str]] = []
    mirror = CustomResourceMirror(
        kube, admitted=lambda _: resources_when_woken.append(set(kube.created))
    )
    session = await h.session()
    turn = await h.control.enqueue(session.id, "work")

    await mirror.turn_enqueued(session, turn)

    assert resources_when_woken == [{KUBECTL_TURN}]  # once, before the Turn's was made
    assert turn_cr_name(turn.id) in kube.created


async def test_a_sessions_hooks_are_mirrored_before_its_own_status(h: Harness) -> None:
    """Its Workspace's hold is released before the Session shows Closed: a kubectl
    user deletes the Workspace next, which admission refuses while it names a holder."""
    kube = SlowKube()
    mirror = CustomResourceMirror(kube)

    async def workspace(session: SessionView) -> None:
        kube.log.append(f"Workspace/{session.workspace}")

    sync = StatusSync(
        h.control, mirror, OperatorMetrics(), wake=lambda changed: None, hooks=(workspace,)
    )
    session = await h.session()
    await h.control.close(session.id)

    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert kube.log[:2] == [f"Workspace/{session.workspace}", f"Session/{session.name}"]
