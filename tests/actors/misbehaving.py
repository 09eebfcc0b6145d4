"""A test actor: the echo example, misbehaving on request, for Helmr's own tests.

Its entrypoint is ``misbehaving:misbehaving`` with ``tests/actors`` and
``examples`` on ``PYTHONPATH``; the local runner image (``helmr.local/runner:dev``)
has both under ``/app``. Not an example: a real actor does none of this.

An input that is an object can ask for misbehaviour before the turn is echoed:

- ``{"crash": true}`` kills the process with exit code 3 (a process crash);
- ``{"raise": "message"}`` raises ``RuntimeError(message)``, which fails that
  turn only (echo's ``serve``), so the session goes on with the next;
- ``{"sleep": seconds}`` sleeps first, ignoring cancellation and the turn's
  signal (a handler stuck in work it cannot stop: for deadlines and stops).

Any other input, and the rest of a misbehaving one, is echoed as the echo
actor does: the result is ``{"echo": input}``.
"""

from __future__ import annotations

import asyncio
import os

from echo.echo import echo_turn, serve

from helmr.runner import Session, Turn, actor

CRASH_EXIT_CODE = 3


async def run(session: Session) -> None:
    await serve(session, misbehaving_turn)


async def misbehaving_turn(turn: Turn) -> None:
    asked = turn.input if isinstance(turn.input, dict) else {}
    if asked.get("crash"):
        os._exit(CRASH_EXIT_CODE)
    if "raise" in asked:
        raise RuntimeError(str(asked["raise"]))
    if "sleep" in asked:
        await sleep_ignoring_cancellation(float(str(asked["sleep"])))
    await echo_turn(turn)


async def sleep_ignoring_cancellation(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        try:
            await asyncio.sleep(left)
        except asyncio.CancelledError:
            continue  # deliberately stuck: only a kill ends this


misbehaving = actor(id="misbehaving", run=run)
