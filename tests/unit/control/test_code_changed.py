"""``helmr dev``'s reload: a process whose code changed is replaced between two Turns,
never during one, and the timeline says why it stopped."""

from __future__ import annotations

from tests.unit.control.harness import Harness


async def test_a_process_holding_a_turn_is_not_replaced_until_the_turn_ends(h: Harness) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)

    assert await h.control.replace_between_turns(session.id, epoch) is None

    await h.control.complete(session.id, epoch, turn.id, "done")
    stop = await h.control.replace_between_turns(session.id, epoch)
    assert stop is not None
    assert (stop.epoch, stop.reason) == (epoch, "code_changed")


async def test_a_replaced_process_takes_no_other_turn_and_its_stop_is_code_changed(
    h: Harness,
) -> None:
    session = await h.session()
    epoch, turn = await h.running(session.id)
    await h.control.complete(session.id, epoch, turn.id, "done")
    await h.control.replace_between_turns(session.id, epoch)
    await h.control.enqueue(session.id, "next")

    assert await h.control.receive(session.id, epoch, timeout=0) is None
    await h.control.process_exited(session.id, epoch, 0)

    stopped = [e for e in await h.events(session.id) if e.kind == "session.process_stopped"]
    assert stopped[-1].data == {"processEpoch": epoch, "reason": "code_changed"}
    assert await h.control.replace_between_turns(session.id, epoch) is None
