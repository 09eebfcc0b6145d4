"""The workbench demo: files written in turn 1 are read back in turn 3, after
the runner pod was deleted between them (execution loss: its disk is restored
from the last save), and a message steers turn 2 while it runs.

On a cluster that cannot save the disk (no CSI snapshots: the Actor's
``SavesAvailable`` condition says why) the demo runs all the same and shows what
that means: the loss says nothing was saved, the Session is held until that is
acknowledged, and turn 3 finds none of turn 1's files.

Driven from outside with the Python client, as examples/echo/demo.py is; the
pod is deleted with kubectl (the cluster admin's kubeconfig), as a node
failure would lose it. Prints the session's timeline as it streams.

    HELMR_URL=... HELMR_TOKEN=... KUBECONFIG=... python examples/workbench/demo.py NAMESPACE
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from helmr.cli import timeline
from helmr.client import Client, SessionRef, TurnRef

WORKSPACE = "workbench-demo"


def turn_one(session_id: str) -> list[str]:
    return [
        f"write plan.md: # Plan of {session_id}\\n1. write the app\\n2. run it",
        "write app.py: import sys\\nprint('hello from', sys.argv[1])",
        "run python3 app.py turn-1 && ls -l",
        "note turn 1 wrote plan.md and app.py",
    ]


TURN_TWO = [
    "replace app.py: hello => hi",
    "run python3 app.py turn-2",
    "wait 60",
    "append plan.md: \\n3. never written: a message steers the turn first",
]
STEERING = "append plan.md: \\n3. steered by a message to the running turn"
TURN_THREE = [
    "read plan.md",
    "read app.py",
    "run python3 app.py turn-3",
    "read .workbench/notes.md",
]


def kubectl(namespace: str, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "-n", namespace, *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def saves_unavailable(namespace: str) -> str | None:
    """Why the cluster cannot save the workbench's disk (its Actor's
    ``SavesAvailable`` condition), or None if it can or may."""
    actor = json.loads(kubectl(namespace, "get", "actor", "workbench", "-o", "json"))
    for condition in actor.get("status", {}).get("conditions", []):
        if condition["type"] == "SavesAvailable" and condition["status"] == "False":
            return str(condition["message"])
    return None


async def acknowledge_recovery_gap(session: SessionRef) -> None:
    """Resumes the Session held for the Turns whose files the loss took (held in
    the transaction that recorded the loss, so held by the time the loss is seen)."""
    hold = (await session.retrieve()).hold
    if hold is not None:
        print(f"# held: {hold.reason}; acknowledged")
        await session.resume(hold_id=hold.hold_id)


async def saved(namespace: str) -> str:
    """Waits until the Workspace's saves are all committed; the last one's name."""
    while True:
        status = json.loads(kubectl(namespace, "get", "workspace", WORKSPACE, "-o", "json"))
        status = status.get("status", {})
        if status.get("computerVersion") and not status.get("pendingSaves"):
            return str(status["computerVersion"])
        await asyncio.sleep(0.5)


async def steer_when_waiting(turn: TurnRef, waiting: asyncio.Event) -> None:
    await waiting.wait()
    await turn.send(STEERING)


async def main(namespace: str) -> None:
    async with Client() as client:
        session, _ = await client.actors.start(
            "workbench", namespace=namespace, workspace=WORKSPACE
        )
        print(f"session {session.id}")
        waiting, lost = asyncio.Event(), asyncio.Event()
        outputs: dict[str, list[object]] = {}
        follower = asyncio.create_task(follow(session, outputs, waiting, lost))

        first = await session.enqueue("\n".join(turn_one(session.id)))
        await first.wait(timeout=120)
        second = await session.enqueue("\n".join(TURN_TWO))
        await steer_when_waiting(second, waiting)
        await second.wait(timeout=120)

        unsaved = saves_unavailable(namespace)
        if unsaved is None:
            print(f"# the saves are committed ({await saved(namespace)}); deleting the runner pod")
        else:
            print(f"# this cluster cannot save the disk: {unsaved}")
            print("# deleting the runner pod: turn 3 will find none of turn 1's files")
        kubectl(namespace, "delete", "pod", "-l", f"helmr.dev/session-id={session.id}")
        await asyncio.wait_for(lost.wait(), 120)
        if unsaved is not None:
            await acknowledge_recovery_gap(session)
        third = await session.enqueue("\n".join(TURN_THREE))
        await third.wait(timeout=180)
        await asyncio.sleep(0.5)  # let the stream print the last records
        follower.cancel()

        for turn in (first, second, third):
            outcome = await turn.retrieve()
            result = outcome.result if isinstance(outcome.result, dict) else {}
            print(f"turn {outcome.sequence}: {outcome.status}, answer={result.get('answer')}")
        print("# turn 3 read back, after the loss:")
        for value in outputs.get(third.id, []):
            if isinstance(value, dict) and "read" in value:
                print(f"--- {value['read']['path']}\n{value['read']['content']}")
            elif isinstance(value, dict) and "refused" in value:
                print(f"--- refused: {value['refused']}")
        await session.close()


async def follow(
    session: SessionRef,
    outputs: dict[str, list[object]],
    waiting: asyncio.Event,
    lost: asyncio.Event,
) -> None:
    """Prints the timeline; keeps each turn's output values; says when turn 2
    waits for its message and when the execution was lost."""
    async for event in session.events.stream(after=0):
        print(timeline.line(event))
        if event.kind == "turn.output" and event.turn_id:
            fragments = event.data if isinstance(event.data, list) else [event.data]
            values = [f.get("json") for f in fragments if isinstance(f, dict)]
            outputs.setdefault(event.turn_id, []).extend(values)
            if any(isinstance(v, dict) and "waiting" in v for v in values):
                waiting.set()
        if event.kind == "session.execution_lost":
            lost.set()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "helmr-demo"))
