"""The demo: one durable session of the echo actor, driven from outside.

Starts a session, enqueues three turns, sends a message to the active one,
and prints the session's timeline as it streams (one readable line an event,
as `helmr session events --follow` prints it), then each turn's outcome.

    HELMR_URL=... HELMR_TOKEN=... python examples/echo/demo.py NAMESPACE
"""

from __future__ import annotations

import asyncio
import sys

from helmr.cli import timeline
from helmr.client import Client


async def main(namespace: str) -> None:
    async with Client() as client:
        session, _ = await client.actors.start("echo", namespace=namespace, workspace="demo")
        print(f"session {session.id}")
        turns = [
            await session.enqueue("Checking the build"),
            await session.enqueue({"issue": "APP-42"}),
            await session.enqueue("three turns, one at a time, in order"),
        ]

        async def follow() -> None:
            async for event in session.events.stream(after=0):
                print(timeline.line(event))

        follower = asyncio.create_task(follow())
        for turn in turns:
            if turn is turns[1]:
                # A message to the active turn (it is delivered to exactly that turn).
                while (await turn.retrieve()).status == "queued":  # noqa: ASYNC110 (remote state)
                    await asyncio.sleep(0.05)
                await turn.send({"note": "hello from outside"})
            await turn.wait(timeout=120)
        await asyncio.sleep(0.5)  # let the stream print the last records
        follower.cancel()
        for turn in turns:
            outcome = await turn.retrieve()
            print(f"turn {outcome.sequence}: {outcome.status}, result={outcome.result}")
        await session.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "helmr-demo"))
