"""Forking a Session at a Turn: a new Session on a new Workspace restored from the
save of exactly that Turn, the source untouched (issue 28, item 5)."""

from __future__ import annotations

import pytest

from helmr.control import SessionView
from helmr.errors import Conflict, NotFound, SaveNotReady
from tests.unit.control.harness import Harness


async def _aligned_turns(h: Harness, n: int) -> tuple[SessionView, int, list[str]]:
    """A Session whose Workspace's saves are cut at Turns' ends, with ``n`` completed
    Turns, each save taken and cut (not ready)."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True)
    epoch = await h.control.process_started(session.id)
    done = []
    for i in range(n):
        await h.control.enqueue(session.id, f"t{i}")
        turn = await h.control.receive(session.id, epoch, timeout=0)
        assert turn is not None
        await h.control.complete(session.id, epoch, turn.id, None)
        await h.control.take_save("team", session.workspace, i + 1)
        await h.control.save_cut("team", session.workspace, i + 1)
        if i + 1 < n:
            await h.control.save_ready("team", session.workspace, i + 1)
        done.append(turn.id)
    return session, epoch, done


async def _fork(h: Harness, source: SessionView, turn: str, workspace: str = "fork") -> SessionView:
    return await h.control.fork_session(
        source_id=source.id, at_turn=turn, name=f"{workspace}-s", workspace=workspace
    )


async def test_a_fork_is_a_new_session_on_a_new_workspace_restored_from_that_turns_save(
    h: Harness,
) -> None:
    source, epoch, done = await _aligned_turns(h, 3)
    forked = await _fork(h, source, done[1])
    assert (forked.actor, forked.workspace, forked.status) == (source.actor, "fork", "open")
    view = await h.control.get_workspace("team", "fork")
    assert view.forked_from is not None
    lineage = view.forked_from
    assert (lineage.session_id, lineage.workspace, lineage.turn_id, lineage.save) == (
        source.id,
        source.workspace,
        done[1],
        f"{source.workspace}-save-2",
    )
    assert view.restored_from == f"{source.workspace}-save-2"  # its first disk's source
    # The source is untouched and keeps running.
    assert (await h.control.get_session(source.id)).status == "open"
    await h.control.enqueue(source.id, "more")
    assert await h.control.receive(source.id, epoch, timeout=0) is not None


async def test_a_fork_of_a_save_being_taken_is_refused_until_it_is_ready(h: Harness) -> None:
    source, _, done = await _aligned_turns(h, 2)
    with pytest.raises(SaveNotReady) as refused:
        await _fork(h, source, done[1])
    assert refused.value.details["save"] == f"{source.workspace}-save-2"
    await h.control.save_ready("team", source.workspace, 2)
    assert (await _fork(h, source, done[1])).workspace == "fork"


async def test_a_fork_of_a_save_not_taken_yet_at_its_turns_end_waits_for_it(h: Harness) -> None:
    """Between its Turn's end and the operator taking it, a save is on its way (the
    Session waits for its cut): the fork is asked again, not refused for good as a
    Turn whose state a later one saves; once a later Turn has run, it is refused."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True)
    epoch = await h.control.process_started(session.id)
    await h.control.enqueue(session.id, "t0")
    turn = await h.control.receive(session.id, epoch, timeout=0)
    assert turn is not None
    await h.control.complete(session.id, epoch, turn.id, None)
    with pytest.raises(SaveNotReady):
        await _fork(h, session, turn.id)
    await h.control.take_save("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    assert (await _fork(h, session, turn.id)).workspace == "fork"


async def test_a_turn_saved_only_with_a_later_one_or_not_completed_is_never_forked(
    h: Harness,
) -> None:
    """Never silently an older or newer state."""
    session = await h.session()
    await h.control.align_saves("team", session.workspace, True)
    epoch = await h.control.process_started(session.id)
    ids = []
    for i in range(3):
        await h.control.enqueue(session.id, f"t{i}")
        turn = await h.control.receive(session.id, epoch, timeout=5)
        assert turn is not None
        await h.control.complete(session.id, epoch, turn.id, None)
        ids.append(turn.id)
        if i == 0:
            await h.control.take_save("team", session.workspace, 1)
            await h.control.save_cut("team", session.workspace, 1)
    await h.control.save_ready("team", session.workspace, 1)
    await h.control.take_save("team", session.workspace, 3)  # covers save 2
    await h.control.save_ready("team", session.workspace, 3)
    with pytest.raises(Conflict, match="no save of its own") as refused:
        await _fork(h, session, ids[1])
    assert refused.value.details["covered_by"] == f"{session.workspace}-save-3"
    await h.control.enqueue(session.id, "running")
    running = await h.control.receive(session.id, epoch, timeout=5)
    assert running is not None
    with pytest.raises(Conflict, match="running"):
        await _fork(h, session, running.id)
    with pytest.raises(NotFound):
        await _fork(h, session, "turn_unknown")


async def test_a_fork_needs_a_new_workspace_and_the_same_actor(h: Harness) -> None:
    source, _, done = await _aligned_turns(h, 1)
    await h.control.save_ready("team", source.workspace, 1)
    with pytest.raises(Conflict, match="new Workspace"):
        await _fork(h, source, done[0], workspace=source.workspace)
    with pytest.raises(Conflict, match="same actor"):
        await h.control.fork_session(
            source_id=source.id, at_turn=done[0], name="x", workspace="w2", actor="other"
        )


async def test_the_save_a_workspace_was_forked_from_is_never_pruned(h: Harness) -> None:
    source, _, done = await _aligned_turns(h, 4)
    await h.control.save_ready("team", source.workspace, 4)
    await _fork(h, source, done[0])
    doomed = await h.control.saves_to_prune("team", source.workspace, 1)
    assert [s.version for s in doomed] == [3, 2]  # save 1 is the fork's
    # A fork's Workspace made anew (its resource created) keeps its lineage.
    await h.control.reset_workspace("team", "fork")
    assert (await h.control.get_workspace("team", "fork")).forked_from is not None
