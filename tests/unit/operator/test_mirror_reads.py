"""The status mirror reads a pass's Sessions, their events and Turns a batch per
transaction (issue 11: those reads were most of a no-op Turn's mirroring cost), and
never reads an API Turn that has no resource; every changed object is still written."""

from __future__ import annotations

from collections import Counter

import pytest

from helmr.operator.mirror import status_sync
from helmr.operator.mirror.custom_resources import CustomResourceMirror, turn_cr_name
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.telemetry.metrics import OperatorMetrics
from tests.unit.control.harness import Harness
from tests.unit.operator.test_status_writes import SlowKube


def mirroring(h: Harness, *, api_turn_resources: bool = True) -> tuple[SlowKube, StatusSync]:
    kube = SlowKube()
    kube.release.set()  # no apiserver slower than the runner here
    mirror = CustomResourceMirror(kube, api_turn_resources=api_turn_resources)
    return kube, StatusSync(h.control, mirror, OperatorMetrics(), wake=lambda changed: None)


def counting_reads(h: Harness) -> Counter[str]:
    """The store's transactions from now on, by kind."""
    counted: Counter[str] = Counter()
    h.store.observe = lambda kind, lane, seconds: counted.update((kind,))
    return counted


async def completed_turns(h: Harness, kube: SlowKube, sessions: int, turns: int) -> list[str]:
    """``sessions`` Sessions with ``turns`` completed API Turns each; the Turns' names."""
    names = []
    for _ in range(sessions):
        session = await h.session()
        epoch = await h.control.process_started(session.id)
        for n in range(turns):
            turn = await h.control.enqueue(session.id, n)
            kube.created.add(turn_cr_name(turn.id))
            names.append(turn_cr_name(turn.id))
            assert await h.control.receive(session.id, epoch, timeout=0) is not None
            await h.control.complete(session.id, epoch, turn.id)
    return names


async def test_a_pass_over_several_batches_writes_every_session_and_turn(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status_sync, "READ_AT_ONCE", 2)
    kube, sync = mirroring(h)
    turns = await completed_turns(h, kube, sessions=5, turns=2)
    changed = await h.control.changed_sessions(timeout=0)
    reads = counting_reads(h)

    await sync.sync(changed)

    assert {name for kind, name in kube.statuses if kind == "Session"} == {
        f"s{n}" for n in range(1, 6)
    }
    assert {name: kube.turn_phase(name) for name in turns} == dict.fromkeys(turns, "completed")
    # Where the mirror left off (its cursors), then each batch of 2 Sessions: one read
    # of them and their events, one of their Turns.
    assert reads["read"] == 1 + 3 * 2


async def test_a_session_with_more_events_than_one_read_is_followed_to_its_end(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status_sync, "EVENTS_READ_AT_ONCE", 2)
    kube, sync = mirroring(h)
    turns = await completed_turns(h, kube, sessions=1, turns=3)

    await sync.sync(await h.control.changed_sessions(timeout=0))

    assert {name: kube.turn_phase(name) for name in turns} == dict.fromkeys(turns, "completed")


async def test_api_turns_without_resources_are_never_read(h: Harness) -> None:
    kube, sync = mirroring(h, api_turn_resources=False)
    await completed_turns(h, kube, sessions=3, turns=2)
    changed = await h.control.changed_sessions(timeout=0)
    reads = counting_reads(h)

    await sync.sync(changed)

    # The cursors, the Sessions with their events and no Turn; then the cursors saved.
    assert reads == Counter(read=2, write=1)
    assert len([kind for kind, _ in kube.statuses if kind == "Session"]) == 3
    assert [kind for kind, _ in kube.statuses if kind == "Turn"] == []
