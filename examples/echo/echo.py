"""An echo actor: the smallest complete Helmr actor.

For each turn it registers a message handler, streams the input back as
output fragments (readable while the turn runs), responds, and completes
with ``{"echo": input}``. Messages sent to the running turn are echoed as
output; a message ``{"reject": "why"}`` is rejected.

Its entrypoint is ``echo.echo:echo`` with ``examples/`` on ``PYTHONPATH``:
Helmr's runner image (``helmr.local/runner:dev``, from runner/Dockerfile or
hack/build-images.sh) has it under ``/app``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from helmr.runner import Message, MessageRejected, Session, Turn, TurnNotActive, actor

FRAGMENT_PAUSE = 0.05
"""Seconds between output fragments, so a reader sees them arrive one by one."""


async def run(session: Session) -> None:
    await serve(session, echo_turn)


async def serve(session: Session, handle: Callable[[Turn], Awaitable[None]]) -> None:
    """Handles the session's turns one at a time, in order, until it has no more."""
    while (turn := await session.receive()) is not None:
        try:
            await handle(turn)
        except TurnNotActive:
            pass  # being interrupted or cancelled: letting go (receive) ends it
        except Exception as error:
            # An exception that escaped run would be a process failure; this
            # fails the one turn ("failed: the handler threw") and goes on.
            await turn.fail(error)


async def echo_turn(turn: Turn) -> None:
    async def echo_message(message: Message) -> None:
        if isinstance(message.data, dict) and "reject" in message.data:
            raise MessageRejected(str(message.data["reject"]))
        await turn.output.write({"message": message.data})

    await turn.on_message(echo_message)
    text = turn.input if isinstance(turn.input, str) else json.dumps(turn.input)
    await turn.output.pipe(fragments(text, turn))
    await turn.respond(f"echo: {text}")
    await turn.complete({"echo": turn.input})


async def fragments(text: str, turn: Turn) -> AsyncIterator[str]:
    """The text word by word, stopping early if the turn is interrupted."""
    for word in text.split(" "):
        if turn.signal.aborted:
            return
        yield word + " "
        await asyncio.sleep(FRAGMENT_PAUSE)


echo = actor(id="echo", run=run)
