"""A test actor that tries the network from inside its runner pod.

Its entrypoint is ``netprobe:netprobe``. A Turn's input may hold:

- ``{"serve": port}``: listens on that TCP port for the rest of the process
  (accepting and closing each connection), for probes of this pod;
- ``{"connect": {"label": ["host", port], ...}}``: TCP connections to each, tried
  ``attempts`` times (default 6) half a second apart, each a success if the
  connection is established (a policy's REJECT refuses it, a DROP times it out);
- ``{"resolve": ["name", ...]}``: DNS lookups, each a success if it answers.

Its result maps each label and name to the list of outcomes, in order: the
cluster tests read whether a destination is open, and whether a policy's closing
(which the engine applies a moment after a pod appears) holds once it comes. That
the Turn completes at all shows the runner reached the runner API.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

from pydantic import JsonValue

from helmr.runner import Session, actor

TIMEOUT = 1.0
PAUSE = 0.5


async def run(session: Session) -> None:
    while (turn := await session.receive()) is not None:
        asked = turn.input if isinstance(turn.input, dict) else {}
        if isinstance(port := asked.get("serve"), int):
            threading.Thread(target=_serve, args=(port,), daemon=True).start()
        attempts = asked.get("attempts")
        times = attempts if isinstance(attempts, int) else 6
        targets = asked.get("connect")
        names = asked.get("resolve")
        probes = {
            str(label): _repeat(times, _connect, str(target[0]), int(str(target[1])))
            for label, target in (targets.items() if isinstance(targets, dict) else [])
            if isinstance(target, list)
        } | {
            str(name): _repeat(times, _resolve, str(name))
            for name in (names if isinstance(names, list) else [])
        }
        outcomes = await asyncio.gather(*probes.values())
        result: dict[str, JsonValue] = {
            label: list(o) for label, o in zip(probes, outcomes, strict=True)
        }
        await turn.complete(result)


async def _repeat(attempts: int, probe: Callable[..., bool], *args: object) -> list[bool]:
    outcomes = []
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(PAUSE)
        outcomes.append(await asyncio.to_thread(probe, *args))
    return outcomes


def _serve(port: int) -> None:
    with socket.create_server(("", port)) as server:
        while True:
            connection, _ = server.accept()
            connection.close()


def _connect(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT):
            return True
    except OSError:
        return False


def _resolve(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None))
    except OSError:
        return False


netprobe = actor(id="netprobe", run=run)
