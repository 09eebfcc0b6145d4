"""What ``helmr dev`` runs: a dev plane until interrupted, and how to reach it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

import uvloop

from helmr import logs
from helmr.dev.plane import DevOptions, DevPlane

log = logging.getLogger(__name__)


def serve(source: str, options: DevOptions) -> None:
    """Runs the dev plane for ``source`` until SIGINT or SIGTERM."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logs.formatter("text"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    try:
        # The loop the control plane runs on in a cluster (`kopf run` takes uvloop
        # when it is installed): what is tried here behaves as it will there.
        uvloop.run(_serve(source, options))
    except OSError as exc:  # its port taken, its directory not writable
        sys.exit(f"helmr dev: {exc} (--port 0 picks a free port)")


async def _serve(source: str, options: DevOptions) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    async with DevPlane(source, options) as plane:
        print(introduction(plane), flush=True)
        await stopping.wait()
        log.info("stopping: the runners end (their Sessions' next turns start new ones)")
    with contextlib.suppress(NotImplementedError):
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def introduction(plane: DevPlane) -> str:
    """What ``helmr dev`` prints once it listens: the API, its token, what to try."""
    root = plane.root
    with contextlib.suppress(ValueError):
        root = root.relative_to(Path.cwd())
    return "\n".join(
        [
            f"helmr dev: Actor {plane.actor} ({plane.where}) in namespace {plane.namespace}",
            f"  API:    {plane.url}",
            f"  Token:  {plane.token}",
            f"  State:  {root}/ (store, Workspaces' Computers, runner tokens)",
            "",
            f"  export HELMR_URL={plane.url} HELMR_TOKEN={plane.token}"
            f" HELMR_NAMESPACE={plane.namespace}",
            f"  helmr session start {plane.actor} -w scratch",
            "",
            "A change to the actor's files replaces its runners at their next turn boundary.",
        ]
    )
