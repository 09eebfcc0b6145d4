"""The workbench agent: a tool-using agent that works in its Computer.

Each turn is a task. The agent asks its planner (``planner.py``: a chat
model when one is configured, a deterministic script otherwise) for one step
at a time and takes it with its tools (``tools.py``): it writes, edits and
reads files under ``/computer``, runs shell commands whose output streams to
the turn line by line, and keeps notes that later turns read. A message sent
to the running turn steers it: the planner hears it before the next step.
When the turn's signal is set (an interrupt, a cancel, the turn's deadline,
the process stopping) the running command's process group is stopped and the
agent lets go of the turn.

Entrypoint: ``workbench.agent:workbench`` (``examples/`` on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from helmr.runner import Message, MessageRejected, Session, Turn, TurnNotActive, actor

from .planner import FINISH, Observation, PlanError, Planner, Step, planner_from_env
from .tools import Computer, ToolError, run_command

COMPUTER_DIR = "/computer"
T = TypeVar("T")
WAIT_LIMIT = 60.0
"""Seconds a ``wait`` step waits for a message at most."""


async def run(session: Session) -> None:
    planner = planner_from_env()
    computer = Computer(Path(os.environ.get("HELMR_COMPUTER_DIR", COMPUTER_DIR)))
    while (turn := await session.receive(tags=["workbench"])) is not None:
        try:
            await work(turn, planner, computer)
        except TurnNotActive:
            pass  # stopped from outside: letting go (receive) ends it
        except (PlanError, ToolError) as error:
            await turn.fail(error)


@dataclass
class Work:
    """What one turn did: its result."""

    steps: int = 0
    files: set[str] = field(default_factory=set)
    commands: list[dict[str, Any]] = field(default_factory=list)
    steered: list[str] = field(default_factory=list)

    def result(self, answer: str) -> dict[str, Any]:
        return {
            "answer": answer,
            "steps": self.steps,
            "files": sorted(self.files),
            "commands": self.commands,
            "steered": self.steered,
        }


async def work(turn: Turn, planner: Planner, computer: Computer) -> None:
    """One task, step by step, until the plan finishes or the turn is stopped."""
    plan = planner.plan(turn.input, computer.notes())
    done = Work()
    message_arrived = asyncio.Event()

    async def steer(message: Message) -> None:
        text = message.data.get("text") if isinstance(message.data, dict) else message.data
        if not isinstance(text, str):
            raise MessageRejected('a message to the workbench is text or {"text": "..."}')
        plan.steer(text)
        done.steered.append(text)
        message_arrived.set()
        await turn.output.write({"steered": text})

    await turn.on_message(steer)
    last: Observation | None = None
    while not turn.signal.aborted:
        step = await _until_stopped(turn, plan.next(last))
        if step is None:
            return
        if step.tool == FINISH:
            answer = step.args.get("answer", "")
            computer.note(f"turn {turn.sequence}: {_first_line(turn.input)} -> {answer}")
            await turn.respond(answer)
            await turn.complete(done.result(answer))
            return
        turn.output.write({"step": {"tool": step.tool, **step.args}})
        message_arrived.clear()
        last = await take(step, turn, computer, done, message_arrived)
        done.steps += 1
    # Stopped between steps: letting go (the next receive) ends the turn.


async def take(
    step: Step, turn: Turn, computer: Computer, done: Work, message_arrived: asyncio.Event
) -> Observation:
    """Takes one step with its tool; a refused step is an observation, not a failure."""
    args = step.args
    try:
        if step.tool == "run":
            return await _run(step, turn, computer, done)
        if step.tool == "wait":
            seconds = min(float(args.get("seconds") or WAIT_LIMIT), WAIT_LIMIT)
            turn.output.write({"waiting": seconds})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_until_stopped(turn, message_arrived.wait()), seconds)
            return Observation(step, "a message arrived" if message_arrived.is_set() else "none")
        text = _file_tool(step, computer)
        if step.tool in ("write", "append", "replace"):
            done.files.add(args["path"])
        if step.tool == "read":
            turn.output.write({"read": {"path": args["path"], "content": text}})
        return Observation(step, text)
    except (ToolError, OSError, ValueError, KeyError) as error:
        turn.output.write({"refused": str(error)})
        return Observation(step, f"error: {error}", ok=False)


def _file_tool(step: Step, computer: Computer) -> str:
    args = step.args
    if step.tool == "write":
        return computer.write(args["path"], args["content"])
    if step.tool == "append":
        return computer.append(args["path"], args["content"])
    if step.tool == "replace":
        return computer.replace(args["path"], args["old"], args["new"])
    if step.tool == "read":
        return computer.read(args["path"])
    if step.tool == "note":
        return computer.note(args["text"])
    raise ToolError(f"no tool {step.tool!r}")


async def _run(step: Step, turn: Turn, computer: Computer, done: Work) -> Observation:
    lines: list[str] = []

    def stream(line: str) -> None:
        lines.append(line)
        turn.output.write({"stdout": line})  # ordered, not awaited: the command goes on

    command = step.args["command"]
    status = await run_command(command, computer.root, stream, turn.signal.wait())
    done.commands.append({"command": command, "exit": status})
    turn.output.write({"exit": status})
    output = "\n".join(lines[-200:])
    if status is None:
        return Observation(step, f"stopped\n{output}", ok=False)
    return Observation(step, f"exit {status}\n{output}", ok=status == 0)


async def _until_stopped(turn: Turn, work: Awaitable[T]) -> T | None:
    """``work``'s value, or None once the turn's signal is set first (``work`` is cancelled)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(turn.signal.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        value: T = task.result()
        return value
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


def _first_line(task: Any) -> str:
    text = task if isinstance(task, str) else str(task)
    return text.strip().splitlines()[0][:80] if text.strip() else "(empty)"


workbench = actor(id="workbench", run=run)
