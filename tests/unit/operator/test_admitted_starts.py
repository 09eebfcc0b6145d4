"""An admitted Turn starts its Session's runner at once (``Supervisor.admitted``), with
no supervisor pass waited for: its limits are read on the way, a pass at the same time
starts it once, and a Session that needs no runner (held, or running one) starts none."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from helmr.control import SessionView
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from tests.unit.control.harness import Harness
from tests.unit.operator.test_concurrent_starts import SlowPods


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
