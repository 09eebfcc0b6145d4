"""A test actor that tries the network from inside its runner pod.

Its entrypoint is ``netprobe:netprobe``. A Turn's input may hold:

- ``{"serve": port}``: listens on that TCP port for the rest of the process
  (accepting and closing each connection), for probes of this pod;
- ``{"connect": {"label": ["host", port], ...}}``: TCP connections to each, tried
  ``attempts`` times (default 6) half a second apart, each a success if the
  connection is established (a policy's REJECT refuses it, a DROP times it out);
- ``{"resolve": ["name", ...]}``: DNS lookups, each a success if it answers;
- ``{"tunnel": {"label": ["host", port], ...}}``: an HTTP CONNECT to each through
  the proxy ``HTTPS_PROXY`` names and, once the tunnel is up, a GET through it: the
  proxy's status line, then the server's (or the proxy's refusal, its body);
- ``{"get": {"label": "http://host:port/path", ...}}``: plain HTTP GETs as urllib
  makes them (through ``HTTP_PROXY`` when set): the status and body;
- ``{"env": ["NAME", ...]}``: those variables of the runner's environment.

Its result maps each label and name to the list of outcomes, in order: the
cluster tests read whether a destination is open, and whether a policy's closing
(which the engine applies a moment after a pod appears) holds once it comes. That
the Turn completes at all shows the runner reached the runner API.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit

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
        for kind, fetch in (("tunnel", _tunnel), ("get", _get)):
            asked_for = asked.get(kind)
            for label, target in asked_for.items() if isinstance(asked_for, dict) else []:
                result[str(label)] = await asyncio.to_thread(fetch, target)
        wanted = asked.get("env")
        for name in wanted if isinstance(wanted, list) else []:
            result[str(name)] = os.environ.get(str(name))
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


def _tunnel(target: object) -> str:
    host, port = (str(part) for part in target) if isinstance(target, list) else ("", "")
    proxy = urlsplit(os.environ.get("HTTPS_PROXY", ""))
    try:
        with socket.create_connection((proxy.hostname or "", proxy.port or 0), timeout=10) as c:
            c.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            answer = c.recv(4096)
            if answer.startswith(b"HTTP/1.1 200"):
                c.sendall(f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            # To the end: the server's answer through the tunnel, or the proxy's refusal.
            while chunk := c.recv(4096):
                answer += chunk
            return answer.decode(errors="replace")
    except OSError as exc:
        return f"error: {exc}"


def _get(url: object) -> str:
    try:
        with urllib.request.urlopen(str(url), timeout=10) as response:
            return f"{response.status} {response.read().decode(errors='replace')}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read().decode(errors='replace')}"
    except OSError as exc:
        return f"error: {exc}"


def _resolve(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None))
    except OSError:
        return False


netprobe = actor(id="netprobe", run=run)
