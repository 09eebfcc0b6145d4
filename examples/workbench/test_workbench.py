"""The workbench agent on a dev plane (``helmr.testing``): a real runner process
under the real control plane, its Computer a directory, no cluster. Its files
survive the loss of its runner, a message steers its running turn, and an
interrupt stops the command it runs (test_tools.py tests the parts alone)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helmr.client import Event
from helmr.testing import Plane, PlaneSession

from .test_tools import gone

WORKBENCH = str(Path(__file__).parent)


@pytest.fixture
def helmr_actor() -> str:
    return WORKBENCH


def outputs(events: list[Event], turn_id: str) -> list[Any]:
    """The values a turn wrote to its output, in order."""
    return [
        fragment.get("json")
        for e in events
        if e.kind == "turn.output" and e.turn_id == turn_id
        for fragment in (e.data if isinstance(e.data, list) else [e.data])
        if isinstance(fragment, dict)
    ]


async def output(session: PlaneSession, turn_id: str, key: str) -> Any:
    """Waits until the turn has written a value with ``key``; that value."""
    for _ in range(400):
        for value in outputs(await session.events(), turn_id):
            if isinstance(value, dict) and key in value:
                return value[key]
        await asyncio.sleep(0.05)
    raise TimeoutError(f"turn {turn_id} wrote no {key!r}")


async def saved(plane: Plane, session: PlaneSession) -> str:
    """Waits until every save of the Session's Workspace is committed; the last one."""
    ref = plane.client.workspaces.ref((await session.retrieve()).workspace_id)
    for _ in range(400):
        workspace = await ref.retrieve()
        if workspace.computer_version and not workspace.pending_saves:
            return workspace.computer_version
        await asyncio.sleep(0.05)
    raise TimeoutError("the Workspace's saves were never committed")


async def test_files_of_turn_one_are_read_back_in_turn_three_after_the_runner_was_lost(
    helmr_plane: Plane,
) -> None:
    session = await helmr_plane.session()
    first = await session.run(
        "write app.py: print('hello from turn 1')\nrun python3 app.py\nnote app.py says hello"
    )
    assert first.status == "completed"
    assert first.result["files"] == ["app.py"]  # type: ignore[index, call-overload]
    second = await session.run("append app.py: \\nprint('and turn 2')")
    assert second.status == "completed"
    await saved(helmr_plane, session)

    session.lose_execution()
    await session.wait_for("session.execution_lost")
    third = await session.enqueue("run python3 app.py\nread .workbench/notes.md")
    ended = await session.ended(third)

    assert ended.status == "completed"
    written = outputs(await session.events(), third.id)
    assert {"stdout": "hello from turn 1"} in written
    assert {"stdout": "and turn 2"} in written
    [notes] = [v["read"]["content"] for v in written if isinstance(v, dict) and "read" in v]
    assert notes.splitlines()[:2] == [
        "app.py says hello",
        "turn 1: write app.py: print('hello from turn 1') -> done: 3 steps",
    ]
    assert (await session.retrieve()).process_epoch == 2


async def test_a_message_changes_what_the_running_turn_does_next(helmr_plane: Plane) -> None:
    session = await helmr_plane.session()
    turn = await session.enqueue("write a.txt: first\nwait 60\nwrite b.txt: not steered")
    await output(session, turn.id, "waiting")

    await session.send("write c.txt: steered")
    ended = await session.ended(turn)

    assert ended.status == "completed"
    assert ended.result["steered"] == ["write c.txt: steered"]  # type: ignore[index, call-overload]
    computer = await session.computer()
    assert (computer / "c.txt").read_text() == "steered"
    assert not (computer / "b.txt").exists()
    rejected = await session.enqueue("wait 60")
    await output(session, rejected.id, "waiting")
    refused = await session.send({"not": "text"})
    assert refused.message is not None
    event = await session.wait_for("message.rejected")
    assert event.data["reason"] == 'a message to the workbench is text or {"text": "..."}'  # type: ignore[index, call-overload]


async def test_an_interrupt_stops_the_command_and_what_it_started(helmr_plane: Plane) -> None:
    session = await helmr_plane.session()
    turn = await session.enqueue("run sleep 300 & echo $! > sleep.pid; echo started; wait")
    assert await output(session, turn.id, "stdout") == "started"
    sleeper = int(((await session.computer()) / "sleep.pid").read_text())
    assert not gone(sleeper)

    await session.interrupt()
    ended = await session.ended(turn)

    assert (ended.status, ended.reason) == ("interrupted", "interrupt")
    assert gone(sleeper)
