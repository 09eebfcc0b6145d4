"""The statuses the mirror remembers having written (issue 11, item 5 budgets): a
status that changed nothing is not patched again, one that did not land is, the
conditions' transition times survive, and each one remembered stays small."""

from __future__ import annotations

import gc
import tracemalloc
from datetime import UTC, datetime
from typing import Any

from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.written_statuses import WrittenStatuses
from helmr.resources import RefusedControl, SessionStatus
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Patches:
    """A patch that lands, or not (``lands``), counting the calls."""

    def __init__(self) -> None:
        self.sent: list[SessionStatus] = []
        self.lands = True

    async def __call__(self, status: SessionStatus) -> bool:
        self.sent.append(status)
        return self.lands


async def test_an_unchanged_status_is_patched_once_and_a_changed_one_again() -> None:
    written = WrittenStatuses[str, SessionStatus](SessionStatus)
    patch = Patches()
    await written.write("s", SessionStatus(phase="open", queued_turns=0), patch)
    await written.write("s", SessionStatus(phase="open", queued_turns=0), patch)
    await written.write("s", SessionStatus(phase="closing", queued_turns=0), patch)
    assert [status.phase for status in patch.sent] == ["open", "closing"]


async def test_a_status_that_did_not_land_is_patched_again() -> None:
    written = WrittenStatuses[str, SessionStatus](SessionStatus)
    patch = Patches()
    patch.lands = False
    await written.write("s", SessionStatus(phase="open"), patch)
    patch.lands = True
    await written.write("s", SessionStatus(phase="open"), patch)
    await written.write("s", SessionStatus(phase="open"), patch)
    assert len(patch.sent) == 2
    assert written.last("s") == SessionStatus(phase="open")


class Forgetful(StubKube):
    """Keeps nothing of what it patched: what stays in memory is the mirror's."""

    async def patch_resource_status(self, *args: object, **kwargs: object) -> bool:
        return True


async def test_a_remembered_session_status_keeps_its_conditions_in_under_a_kib(
    h: Harness,
) -> None:
    views = []
    for _ in range(100):
        session = await h.session()
        await h.running(session.id)
        views.append(await h.control.get_session(session.id))
    mirror = CustomResourceMirror(Forgetful())
    await mirror.sync_session(views[0], "pod-1")  # imports and caches, not per Session
    gc.collect()
    tracemalloc.start()
    try:
        for view in views[1:]:
            await mirror.sync_session(view, "pod-1")
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # As models with their conditions they took 3.6 KiB each.
    assert kept / (len(views) - 1) < 1024
    remembered = mirror._session_statuses.last(views[1].id)
    assert remembered is not None
    assert remembered.conditions
    # Read back for the next pass's conditions, their transition times intact.
    again = await mirror._previous_conditions(views[1])
    assert again == remembered.conditions


async def test_a_status_seen_before_any_write_counts_as_written_and_a_write_outlives_it() -> None:
    written = WrittenStatuses[str, SessionStatus](SessionStatus)
    patch = Patches()
    written.seen("listed", SessionStatus(phase="open"))
    await written.write("listed", SessionStatus(phase="open"), patch)
    assert patch.sent == []
    await written.write("s", SessionStatus(phase="closing"), patch)
    written.seen("s", SessionStatus(phase="open"))  # older than what this process wrote
    await written.write("s", SessionStatus(phase="closing"), patch)
    assert [status.phase for status in patch.sent] == ["closing"]


class Counting(StubKube):
    """Counts status patches and reads of Session resources."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        self.reads += 1
        return await super().get_resource(kind, namespace, name)


def as_listed(status: SessionStatus) -> SessionStatus:
    """The status as the server keeps it after the patch (a null removes a field),
    parsed back from kopf's listing."""
    patched = {k: v for k, v in status.status_patch()["status"].items() if v is not None}
    return SessionStatus.model_validate(patched)


async def test_a_restarted_mirror_neither_patches_nor_reads_a_session_that_did_not_change(
    h: Harness,
) -> None:
    session = await h.session()
    await h.running(session.id)
    view = await h.control.get_session(session.id)
    before = Counting()
    await CustomResourceMirror(before).sync_session(view, "pod-1")
    on_server = before.statuses[("Session", view.name)]
    assert isinstance(on_server, SessionStatus)

    after = Counting()
    restarted = CustomResourceMirror(after)
    restarted.status_seen(view.id, as_listed(on_server))  # the resume handler
    await restarted.sync_session(view, "pod-1")
    assert after.log == []
    assert after.reads == 0

    await h.control.enqueue(view.id, "more")  # a change is still written
    await restarted.sync_session(await h.control.get_session(view.id), "pod-1")
    assert after.log == [f"Session/{view.name}"]


async def test_a_refusal_in_the_listed_status_is_not_patched_again_after_a_restart(
    h: Harness,
) -> None:
    """``lastRefused`` is written by the refusals alone (helmr.operator.mirror.refusals): the
    status sync neither sends it nor counts it as a change."""
    view = await h.control.get_session((await h.session()).id)
    before = Counting()
    await CustomResourceMirror(before).sync_session(view, None)
    on_server = before.statuses[("Session", view.name)]
    assert isinstance(on_server, SessionStatus)
    listed = as_listed(on_server)
    listed.last_refused = RefusedControl(
        control="spec.resume", reason="HoldMismatch", message="refused", at=T0
    )

    after = Counting()
    restarted = CustomResourceMirror(after)
    restarted.status_seen(view.id, listed)
    await restarted.sync_session(view, None)
    assert after.log == []
