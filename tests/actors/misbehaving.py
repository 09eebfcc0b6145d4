"""A test actor: the echo example, misbehaving on request, for Helmr's own tests.

Its entrypoint is ``misbehaving:misbehaving`` with ``tests/actors`` and
``examples`` on ``PYTHONPATH``; the local runner image (``helmr.local/runner:dev``)
has both under ``/app``. Not an example: a real actor does none of this.

An input that is an object can ask for misbehaviour before the turn is echoed:

- ``{"crash": true}`` kills the process with exit code 3 (a process crash);
- ``{"raise": "message"}`` raises ``RuntimeError(message)``, which fails that
  turn only (echo's ``serve``), so the session goes on with the next;
- ``{"sleep": seconds}`` sleeps first, ignoring cancellation and the turn's
  signal (a handler stuck in work it cannot stop: for deadlines and stops);
- ``{"await_signal": seconds}`` sleeps as a handler in a long provider call
  does, but stops the moment the turn's signal fires: it then writes the
  session output ``{"signal": reason, "turnId": ..., "at": its wall clock}``
  and lets go of the turn unsettled (a stop's outcome is the control plane's).

Any other input, and the rest of a misbehaving one, is echoed as the echo
actor does: the result is ``{"echo": input}``.
"""

from __future__ import annotations

import asyncio
import os
import time

from echo.echo import echo_turn, serve

from helmr.runner import Session, Turn, actor

CRASH_EXIT_CODE = 3


async def run(session: Session) -> None:
    await serve(session, lambda turn: misbehaving_turn(session, turn))


async def misbehaving_turn(session: Session, turn: Turn) -> None:
    asked = turn.input if isinstance(turn.input, dict) else {}
    if asked.get("crash"):
        os._exit(CRASH_EXIT_CODE)
    if "raise" in asked:
        raise RuntimeError(str(asked["raise"]))
    if "sleep" in asked:
        await sleep_ignoring_cancellation(float(str(asked["sleep"])))
    if "await_signal" in asked and await sleep_until_signalled(
        turn, float(str(asked["await_signal"]))
    ):
        heard = {"signal": turn.signal.reason, "turnId": turn.id, "at": time.time()}
        await session.output.write(heard)
        return
    await echo_turn(turn)


async def sleep_until_signalled(turn: Turn, seconds: float) -> bool:
    """Whether the turn's signal fired within ``seconds``."""
    try:
        await asyncio.wait_for(turn.signal.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def sleep_ignoring_cancellation(seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        try:
            await asyncio.sleep(left)
        except asyncio.CancelledError:
            continue  # deliberately stuck: only a kill ends this


misbehaving = actor(id="misbehaving", run=run)
