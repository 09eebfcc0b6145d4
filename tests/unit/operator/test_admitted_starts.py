"""An admitted Turn starts its Session's runner at once (``Supervisor.admitted``), with
no supervisor pass waited for: its limits are read on the way, a pass at the same time
starts it once, a Session that needs no runner (held, or running one) starts none, and
the Session and Actor resources this process holds are not read again."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime
from typing import Any, TypeVar

import pytest

from helmr.control import SessionView
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.recent_resources import KEPT_SECONDS, RecentResources
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import Actor, Resource, Session, Workspace
from helmr.resources.session_env import NO_ENV
from tests.unit.control.harness import Harness
from tests.unit.control.pooled import DISK, pooled
from tests.unit.operator.stub_kube import any_resource
from tests.unit.operator.test_concurrent_starts import SlowPods

R = TypeVar("R", bound=Resource[Any, Any])


def supervisor(h: Harness, kube: SlowPods) -> Supervisor:
    return Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())


async def admitted(h: Harness, plane: Supervisor) -> SessionView:
    """A new Session (its limits not read yet) given a Turn, as the API admits it."""
    session = await h.session()
    view, _ = await h.control.enqueue_answering_session(session.id, "go")
    plane.admitted(view)
    return view


async def settled(plane: Supervisor) -> None:
    while plane._admissions:
        await asyncio.gather(*plane._admissions)


async def test_an_admitted_turn_starts_its_runner_without_a_pass(h: Harness) -> None:
    kube = SlowPods()
    plane = supervisor(h, kube)
    session = await admitted(h, plane)
    await settled(plane)

    view = await h.control.get_session(session.id)
    assert (view.process_live, view.process_epoch) == (True, 1)
    assert view.limits is not None
    assert kube.created.count("team/pod") == 1


async def test_a_pass_meeting_an_admissions_start_starts_it_once(h: Harness) -> None:
    kube = SlowPods()
    plane = supervisor(h, kube)
    session = await admitted(h, plane)
    await plane.reconcile()
    await settled(plane)

    # Its disk is prepared once too (two starts' second would fail after making it again).
    assert kube.created.count("team/claim") == 1
    assert kube.created.count("team/pod") == 1
    assert (await h.control.get_session(session.id)).process_epoch == 1


async def test_a_pass_whose_listing_an_admissions_start_overtakes_starts_nothing_again(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pass lists the Session as needing a runner; the admission's start commits
    # before the pass's start runs: the listing is stale, and nothing starts twice.
    kube = SlowPods()
    plane = supervisor(h, kube)
    session = await admitted(h, plane)
    listed = plane.control.sessions_needing_runner

    async def overtaken(now: datetime) -> list[SessionView]:
        waiting = await listed(now)
        await settled(plane)
        return waiting

    monkeypatch.setattr(plane.control, "sessions_needing_runner", overtaken)
    await plane.reconcile()

    assert kube.created.count("team/claim") == 1
    assert kube.created.count("team/pod") == 1
    assert (await h.control.get_session(session.id)).process_epoch == 1


async def test_a_session_that_needs_no_runner_starts_none(h: Harness) -> None:
    kube = SlowPods()
    plane = supervisor(h, kube)
    held = await h.session()
    await h.control.interrupt(held.id)
    view, _ = await h.control.enqueue_answering_session(held.id, "go")
    plane.admitted(view)
    running = await h.session()
    await h.running(running.id)
    view, _ = await h.control.enqueue_answering_session(running.id, "next")
    plane.admitted(view)
    await settled(plane)

    assert kube.created == []


class CountedReads(SlowPods):
    """Counts the Session and Actor resources read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        self.reads.append(kind.KIND)
        return await super().get_resource(kind, namespace, name)


async def test_a_start_reads_no_resource_this_process_holds(h: Harness) -> None:
    # The Session's resource as its API made it, and its Actor as kopf's watch gave it.
    kube = CountedReads()
    actor: Actor = any_resource(Actor, "team", "reviewer")
    recent = RecentResources(kube, {("team", "reviewer"): actor}.get)
    plane = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics(), recent=recent)
    session = await h.session()
    recent.created(session.id, any_resource(Session, "team", session.name), None)
    view, _ = await h.control.enqueue_answering_session(session.id, "go")
    plane.admitted(view)
    await settled(plane)

    assert kube.created.count("team/pod") == 1
    assert [kind for kind in kube.reads if kind in (Session.KIND, Actor.KIND)] == []


async def test_a_session_resource_not_made_just_now_is_read_and_a_made_one_once(
    h: Harness,
) -> None:
    kube = CountedReads()
    now = [0.0]
    recent = RecentResources(kube, clock=lambda: now[0])
    made, older = await h.session(), await h.session()
    recent.created(made.id, any_resource(Session, "team", made.name), None)
    recent.created(older.id, any_resource(Session, "team", older.name), None)

    assert (await recent.session(made))[0] is not None
    assert (await recent.session(made))[0] is not None  # its second start reads it
    now[0] = KEPT_SECONDS + 1  # it may have been edited since
    assert (await recent.session(older))[0] is not None
    assert await recent.actor(made) is not None
    assert kube.reads == [Session.KIND, Session.KIND, Actor.KIND]


class Creating:
    """An apiserver that makes every resource it is given (a uid its own)."""

    async def create_resource(self, resource: R) -> R | None:
        return resource.model_copy(
            update={"metadata": resource.metadata.model_copy(update={"uid": "made"})}
        )


async def test_the_session_resource_the_api_makes_is_told_for_its_start(h: Harness) -> None:
    told: dict[str, Session] = {}
    mirror = CustomResourceMirror(
        Creating(),  # type: ignore[arg-type]
        created=lambda session_id, resource, workspace: told.update({session_id: resource}),
    )
    session = await h.session()
    await mirror.session_started(session, NO_ENV)

    assert list(told) == [session.id]
    assert told[session.id].metadata.name == session.name


class Existing(Creating):
    """An apiserver where the Workspace exists already (a user's, made beforehand)."""

    async def create_resource(self, resource: R) -> R | None:
        if isinstance(resource, Workspace):
            return None
        return await super().create_resource(resource)


@pytest.mark.parametrize("there_before", [False, True])
async def test_the_api_makes_the_sessions_workspace_beside_it_and_forgets_an_older_ones_disk(
    h: Harness, there_before: bool
) -> None:
    # The store knew a disk of an older Workspace of that name (deleted with kubectl).
    session = await h.session()
    await h.control.current_disk("team", session.workspace)
    told: dict[str, tuple[Session, Workspace | None]] = {}
    mirror = CustomResourceMirror(
        Existing() if there_before else Creating(),  # type: ignore[arg-type]
        created=lambda session_id, resource, workspace: told.update(
            {session_id: (resource, workspace)}
        ),
        workspaces=h.control,
    )
    await mirror.session_started(session, NO_ENV)

    [(resource, workspace)] = told.values()
    assert resource.metadata.name == session.name
    if there_before:  # its disk is its own: kept, and read by the start
        assert workspace is None
        assert not await h.control.adopt(session.id, 1, pooled(), DISK)
    else:
        assert workspace is not None
        assert workspace.metadata.name == session.workspace
        assert await h.control.adopt(session.id, 1, pooled(), DISK)  # no disk in the way


async def test_a_workspace_the_api_makes_on_a_name_the_store_never_knew_writes_nothing(
    h: Harness,
) -> None:
    # A reset's write before the start call answers cost it ~28 ms (results.md, 4
    # December): a new name, the common case, has nothing to reset.
    session = await h.session()
    transactions: Counter[str] = Counter()
    h.store.observe = lambda kind, lane, seconds: transactions.update((kind,))
    told: dict[str, Workspace | None] = {}
    mirror = CustomResourceMirror(
        Creating(),  # type: ignore[arg-type]
        created=lambda session_id, resource, workspace: told.update({session_id: workspace}),
        workspaces=h.control,
    )
    await mirror.session_started(session, NO_ENV)

    assert told[session.id] is not None
    assert transactions["write"] == 0


class Adoptions:
    """A pool that adopts nothing, noting the Workspace each start offered."""

    def __init__(self) -> None:
        self.workspaces: list[Workspace | None] = []

    async def adopt(
        self, session: Any, owner: Any, actor: Any, limits: Any, workspace: Any
    ) -> bool:
        self.workspaces.append(workspace)
        return False


async def test_a_start_offers_the_workspace_the_api_made_to_its_adoption(h: Harness) -> None:
    kube = CountedReads()
    pools = Adoptions()
    recent = RecentResources(kube)
    plane = Supervisor(
        h.control,
        kube,
        RunnerPods(),
        Settings(),
        OperatorMetrics(),
        pools=pools,  # type: ignore[arg-type]
        recent=recent,
    )
    made, unmade = await h.session(), await h.session()
    workspace = any_resource(Workspace, "team", made.workspace)
    recent.created(made.id, any_resource(Session, "team", made.name), workspace)
    recent.created(unmade.id, any_resource(Session, "team", unmade.name), None)
    for session in (made, unmade):
        view, _ = await h.control.enqueue_answering_session(session.id, "go")
        plane.admitted(view)
        await settled(plane)

    assert pools.workspaces == [workspace, None]
