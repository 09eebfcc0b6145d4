"""An echo actor: the smallest complete Helmr actor, and a test double for Helmr's own tests.

For each turn it registers a message handler, streams the input back as
output fragments (readable while the turn runs), responds, and completes
with ``{"echo": input}``. Messages sent to the running turn are echoed as
output; a message ``{"reject": "why"}`` is rejected.

Its entrypoint is ``echo:echo`` with ``examples/echo`` on ``PYTHONPATH`` (an
image built from runner/Dockerfile), or ``echo.echo:echo`` with ``examples/``
on it (the local ``helmr.local/runner:dev`` image).

Inputs that are objects can ask for misbehaviour, for tests of Helmr:

- ``{"sleep": seconds}`` sleeps first, ignoring cancellation (a handler
  stuck in work it cannot stop: for turn deadlines);
- ``{"crash": true}`` kills the process with exit code 3 (a process crash);
- ``{"raise": "message"}`` raises ``RuntimeError(message)``. ``run`` catches
  it and fails that turn, so the session stays open for the next turn. An
  exception that escapes ``run`` instead is a process failure.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from helmr.runner import Message, MessageRejected, Session, Turn, TurnNotActive, actor

FRAGMENT_PAUSE = 0.05
"""Seconds between output fragments, so a reader sees them arrive one by one."""


async def run(session: Session) -> None:
    while (turn := await session.receive()) is not None:
        try:
            await echo_turn(turn)
        except TurnNotActive:
            pass  # interrupted or cancelled elsewhere: its outcome is already recorded
        except Exception as error:
            await turn.fail(error)  # "failed: the handler threw"; the session goes on


async def echo_turn(turn: Turn) -> None:
    async def echo_message(message: Message) -> None:
        if isinstance(message.data, dict) and "reject" in message.data:
            raise MessageRejected(str(message.data["reject"]))
        await turn.output.write({"message": message.data})

    await turn.on_message(echo_message)
    misbehave(turn.input)
    if isinstance(turn.input, dict) and "sleep" in turn.input:
        await sleep_ignoring_cancellation(float(turn.input["sleep"]))
    text = turn.input if isinstance(turn.input, str) else json.dumps(turn.input)
    await turn.output.pipe(fragments(text, turn))
    await turn.respond(f"echo: {text}")
    await turn.complete({"echo": turn.input})


def misbehave(input: Any) -> None:
    if not isinstance(input, dict):
        return
    if input.get("crash"):
        os._exit(3)
    if "raise" in input:
        raise RuntimeError(str(input["raise"]))


async def fragments(text: str, turn: Turn) -> AsyncIterator[str]:
    """The text word by word, stopping early if the turn is interrupted."""
    for word in text.split(" "):
        if turn.signal.aborted:
            return
        yield word + " "
        await asyncio.sleep(FRAGMENT_PAUSE)


async def sleep_ignoring_cancellation(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        try:
            await asyncio.sleep(left)
        except asyncio.CancelledError:
            continue  # deliberately stuck: only a kill ends this


echo = actor(id="echo", run=run)
