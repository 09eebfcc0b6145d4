"""The control plane the scale benchmarks measure: ``_scale_plane.py`` run as a
process of its own (started, killed and started again), its store seeded with
open Sessions and history, its counts read, and one load of a fleet against it
counted. Shared by ``bench_scale.py``, ``_replicas.py`` and ``_before_after.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import aiohttp
from _fleet import Fleet, load
from _history import seed_history
from _loops import PRODUCT
from _plane_counts import COUNTS_ROUTE
from tests.compose import open_plane

HERE = Path(__file__).resolve().parent
NAMESPACE = "bench"


# --- seeding ----------------------------------------------------------------------------


async def seed(store: str, sessions: int, history: int) -> dict[str, int]:
    """``sessions`` open Sessions with their processes started and ``history``
    completed Turns over them; each Session's id -> its process epoch."""
    epochs: dict[str, int] = {}
    async with open_plane(store) as plane:
        for i in range(sessions):
            view = await plane.control.open_session(
                namespace=NAMESPACE, name=f"s{i}", actor="noop", workspace=f"ws{i}"
            )
            epochs[view.id] = await plane.control.process_started(view.id)
    await seed_history(store, epochs, history)
    return epochs


# --- the control plane's process ----------------------------------------------------------


class Plane:
    """``_scale_plane.py`` on ``store``: started, killed and started again."""

    def __init__(
        self,
        store: str,
        api_turn_resources: bool,
        count: bool = False,
        mirrors: bool = True,
        token: str | None = None,
        src: Path | None = None,
        loop: str = PRODUCT,
    ) -> None:
        """``token``: the one a replica shares with the others (new if None); ``src``:
        another version's ``src`` directory to run (``fleet --before``); ``loop``: the
        event loop it runs on (``_loops.py``)."""
        self.store = store
        self.src = src
        self.loop = loop
        self.mirrors = mirrors
        self.api_turn_resources = api_turn_resources
        self.count = count
        self.token = token or uuid.uuid4().hex
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [sys.executable, str(HERE / "_scale_plane.py"), self.store, str(self.port)]
        args += [self.token, *(["--api-turn-resources"] if self.api_turn_resources else [])]
        args += ["--count"] if self.count else []
        args += [] if self.mirrors else ["--no-mirror"]
        args += ["--loop", self.loop]
        env = None if self.src is None else {**os.environ, "PYTHONPATH": str(self.src)}
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != b"ready":
            raise SystemExit(f"the control plane did not start: {line!r}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.start()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise LookupError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the load ----------------------------------------------------------------------------


async def mirror_passes(http: aiohttp.ClientSession, plane: Plane) -> list[tuple[int, float]]:
    async with http.get(plane.url + "/bench/passes") as answer:
        passes: list[tuple[int, float]] = await answer.json()
    return passes


async def mirror_writes(http: aiohttp.ClientSession, plane: Plane) -> int:
    async with http.get(plane.url + "/bench/writes") as answer:
        counts: dict[str, int] = await answer.json()
    return sum(counts.values())


async def plane_counts(http: aiohttp.ClientSession, plane: Plane) -> dict[str, float]:
    if not plane.count:
        return {}
    async with http.get(plane.url + COUNTS_ROUTE) as answer:
        counts: dict[str, float] = await answer.json()
    return counts


async def counted_load(
    http: aiohttp.ClientSession, plane: Plane, fleet: Fleet, args: argparse.Namespace, name: str
) -> tuple[int, float, list[float], dict[str, float], dict[str, float]]:
    """One load of ``args``: the Turns completed, the time taken, enqueue -> running, and
    the control plane's counts before and after (with ``--profile``: sampled as ``name``)."""
    before = await plane_counts(http, plane)
    spy = await profile(args, plane, name)
    done, took, latencies = await load(
        http, plane, fleet, args.clients, args.seconds, args.burst, args.rate
    )
    after = await plane_counts(http, plane)
    if spy is not None:
        await spy.wait()
    return done, took, latencies, before, after


async def profile(
    args: argparse.Namespace, plane: Plane, name: str
) -> asyncio.subprocess.Process | None:
    """With ``--profile DIR``: py-spy sampling the control plane through one load."""
    if args.profile is None:
        return None
    from _profile import record

    args.profile.mkdir(parents=True, exist_ok=True)
    return await record(plane.pid, args.seconds, args.profile / f"{name}.txt")
