"""The workbench's tools: files in the Computer, shell commands, notes.

Every path is relative to the Computer (``HELMR_COMPUTER_DIR``, ``/computer``
in a runner pod), the Workspace's disk that Helmr saves after each completed
turn and restores after execution loss: what the agent writes there is what
survives. Its notes are a file there too (``NOTES``), so they outlive the
process and are read again at the start of every turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

NOTES = ".workbench/notes.md"
"""The agent's notes, kept across turns (and across runner processes) on the Computer."""
STOP_GRACE = 2.0
"""Seconds a stopped command's process group has between SIGTERM and SIGKILL."""
READ_LIMIT = 16_384
"""Characters of a file ``read`` returns: the rest is said to be cut."""


class ToolError(Exception):
    """A tool refused its arguments (the planner sees the message and goes on)."""


class Computer:
    """The Computer's files, seen from the agent: every path inside ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, relative: str) -> Path:
        """``relative`` under the root; a path that leaves it is refused."""
        if not relative:
            raise ToolError("a path is needed")
        path = (self.root / relative).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ToolError(f"{relative} is outside the Computer")
        return path

    def write(self, relative: str, content: str) -> str:
        path = self.path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        return f"wrote {len(content)} characters to {relative}"

    def append(self, relative: str, content: str) -> str:
        path = self.path(relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(content)
        return f"appended {len(content)} characters to {relative}"

    def replace(self, relative: str, old: str, new: str) -> str:
        """Edits a file: replaces every ``old`` with ``new``; ``old`` must be there."""
        text = self.read(relative)
        if not old or old not in text:
            raise ToolError(f"{relative} does not contain {old!r}")
        self.path(relative).write_text(text.replace(old, new))
        return f"replaced {text.count(old)} of {old!r} in {relative}"

    def read(self, relative: str) -> str:
        path = self.path(relative)
        if not path.is_file():
            raise ToolError(f"{relative} is not a file")
        text = path.read_text(errors="replace")
        if len(text) > READ_LIMIT:
            return text[:READ_LIMIT] + f"\n[cut: {len(text) - READ_LIMIT} more characters]"
        return text

    def note(self, text: str) -> str:
        self.append(NOTES, text.rstrip("\n") + "\n")
        return "noted"

    def notes(self) -> str:
        path = self.path(NOTES)
        return path.read_text() if path.is_file() else ""


async def run_command(
    command: str,
    cwd: Path,
    on_line: Callable[[str], object],
    stop: Awaitable[object],
) -> int | None:
    """Runs ``command`` with ``sh -c`` in ``cwd``, handing each line it prints
    (stdout and stderr) to ``on_line`` as it comes; returns its exit status, or
    None when ``stop`` finished first: then the command's whole process group
    (what it started too) is terminated, and killed after ``STOP_GRACE``.

    Helmr's own variables (the runner's token among them) are not passed on:
    a command the agent runs is not the runner.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELMR_")}
    process = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopping it stops its children
    )
    assert process.stdout is not None

    async def relay() -> int:
        assert process.stdout is not None
        async for line in process.stdout:
            if not stopped.done():  # what it prints while being stopped is not relayed
                on_line(line.decode(errors="replace").rstrip("\n"))
        return await process.wait()

    finished = asyncio.ensure_future(relay())
    stopped = asyncio.ensure_future(stop)
    try:
        await asyncio.wait({finished, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if finished.done():
            return finished.result()
        return None
    finally:
        stopped.cancel()
        if not finished.done():
            await _stop_group(process)
            # Read the output to its end rather than cancel the reader: a pipe
            # left unread is never closed (asyncio warns of the open transport).
            # The group is gone, so the end comes at once unless something left
            # the group holding the pipe; that one is abandoned after the grace.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished, STOP_GRACE)


async def _stop_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the process group; once the shell is gone or the grace period
    is over, SIGKILL to what is left of the group (a child that ignored SIGTERM)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(process.wait()), STOP_GRACE)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
    # A killed process dies when it is next scheduled, not when the signal is
    # sent: the turn must not end while what the command started can still
    # write to the Computer (its save would hold half of a write).
    deadline = asyncio.get_running_loop().time() + STOP_GRACE
    while await asyncio.to_thread(_group_alive, process.pid):
        if asyncio.get_running_loop().time() > deadline:
            break  # stuck in the kernel (uninterruptible I/O): nothing more to send it
        await asyncio.sleep(0.01)


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` is still alive. A zombie is not: a runner
    that is its pod's PID 1 reaps no orphans, so a dead grandchild may stay a
    zombie for good, and ``killpg(group, 0)`` counts zombies."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit() and _live_in(Path(entry.path, "stat"), group):
                return True
    return False


def _live_in(stat_file: Path, group: int) -> bool:
    """Whether the process whose ``/proc/<pid>/stat`` this is lives, in ``group``."""
    try:
        stat = stat_file.read_text()
    except OSError:  # it ended while /proc was read
        return False
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split(" ", 3)[:3]
    return int(pgrp) == group and state != "Z"
