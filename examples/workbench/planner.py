"""The workbench's planning step, behind one small interface.

A ``Planner`` starts a ``Plan`` per turn, from the turn's task and the
agent's notes. The agent asks the plan for its next ``Step`` with what the
last one gave (an ``Observation``) until the plan says ``finish``; a message
sent to the turn is handed to ``Plan.steer`` and changes what comes next.

Two planners:

- ``ChatPlanner``: an OpenAI-compatible chat completions endpoint
  (``WORKBENCH_CHAT_URL``, e.g. ``https://api.openai.com/v1``, with
  ``WORKBENCH_CHAT_KEY`` and ``WORKBENCH_CHAT_MODEL``), the tools offered as
  functions; the model's tool calls are the steps, its plain answer finishes.
- ``ScriptedPlanner``: no model, deterministic: the task is a script of one
  step a line (``SCRIPT_HELP``) and a steering message is a script that
  replaces the steps not yet taken. The demo and the tests run with it, offline.

``planner_from_env`` picks the first when its URL is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

TOOLS: dict[str, str] = {
    "write": "Write a file of the Computer (path, content), replacing it.",
    "append": "Append content to a file of the Computer (path, content).",
    "replace": "Edit a file: replace every occurrence of old with new (path, old, new).",
    "read": "Read a file of the Computer (path).",
    "run": "Run a shell command in the Computer (command); its output streams to the turn.",
    "note": "Keep a note for later turns (text).",
    "wait": "Wait for a message from the user, at most seconds (seconds).",
}
"""The tools a plan may call, with what the model is told of each."""
TOOL_ARGS: dict[str, tuple[str, ...]] = {
    "write": ("path", "content"),
    "append": ("path", "content"),
    "replace": ("path", "old", "new"),
    "read": ("path",),
    "run": ("command",),
    "note": ("text",),
    "wait": ("seconds",),
}
FINISH = "finish"

SCRIPT_HELP = """\
One step a line:
  write PATH: CONTENT        (\\n in CONTENT is a new line)
  append PATH: CONTENT
  replace PATH: OLD => NEW
  read PATH
  run COMMAND
  note TEXT
  wait [SECONDS]             (until a message steers the turn; 60 s at most)
  finish [ANSWER]"""


class PlanError(Exception):
    """The plan cannot go on (a script line it cannot read, an endpoint that fails)."""


@dataclass(frozen=True)
class Step:
    """One tool call, or ``finish`` with the turn's answer in ``args["answer"]``."""

    tool: str
    args: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    """What a step gave: its text (a file, a command's output, an error) and whether it worked."""

    step: Step
    text: str
    ok: bool = True


class Plan(Protocol):
    def steer(self, text: str) -> None:
        """A message sent to the running turn: it changes what comes next."""

    async def next(self, last: Observation | None) -> Step:
        """The next step, given what the last one gave (None before the first)."""


class Planner(Protocol):
    def plan(self, task: Any, notes: str) -> Plan:
        """A plan for one turn's ``task`` (its input), knowing the agent's ``notes``."""


def planner_from_env(environ: Mapping[str, str] = os.environ) -> Planner:
    """The chat planner when ``WORKBENCH_CHAT_URL`` is set, else the scripted one."""
    url = environ.get("WORKBENCH_CHAT_URL")
    if not url:
        return ScriptedPlanner()
    return ChatPlanner(
        url=url,
        key=environ.get("WORKBENCH_CHAT_KEY", ""),
        model=environ.get("WORKBENCH_CHAT_MODEL", "gpt-4o-mini"),
    )


# --- scripted: deterministic, offline


def parse_script(text: str) -> list[Step]:
    """The steps of a script (``SCRIPT_HELP``); blank lines and ``#`` comments skipped."""
    steps = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                steps.append(_parse_line(line))
            except PlanError as e:
                raise PlanError(f"line {number} ({line!r}): {e}\n{SCRIPT_HELP}") from None
    return steps


def _parse_line(line: str) -> Step:
    word, _, rest = line.partition(" ")
    rest = rest.strip()
    if word in ("write", "append"):
        path, colon, content = rest.partition(":")
        if not colon:
            raise PlanError(f"{word} needs PATH: CONTENT")
        return Step(word, {"path": path.strip(), "content": content.strip().replace("\\n", "\n")})
    if word == "replace":
        path, colon, change = rest.partition(":")
        old, arrow, new = change.partition("=>")
        if not (colon and arrow):
            raise PlanError("replace needs PATH: OLD => NEW")
        return Step(word, {"path": path.strip(), "old": old.strip(), "new": new.strip()})
    if word in ("read", "run", "note") and rest:
        return Step(word, {TOOL_ARGS[word][0]: rest})
    if word == "wait":
        return Step(word, {"seconds": rest or "60"})
    if word == FINISH:
        return Step(FINISH, {"answer": rest} if rest else {})
    raise PlanError(f"unknown step {word!r}" if word not in TOOLS else f"{word} needs an argument")


def script_of(task: Any) -> str:
    """A task as script text: a string, a list of lines, or ``{"script": ...}``."""
    if isinstance(task, dict) and "script" in task:
        task = task["script"]
    if isinstance(task, list) and all(isinstance(line, str) for line in task):
        return "\n".join(task)
    if isinstance(task, str):
        return task
    raise PlanError(f"a scripted task is text, a list of lines or {{'script': ...}}\n{SCRIPT_HELP}")


class ScriptedPlan:
    def __init__(self, steps: list[Step]) -> None:
        self._steps = steps
        self._taken = 0

    def steer(self, text: str) -> None:
        self._steps = parse_script(text)

    async def next(self, last: Observation | None) -> Step:
        if not self._steps:
            return Step(FINISH, {"answer": f"done: {self._taken} steps"})
        self._taken += 1
        return self._steps.pop(0)


class ScriptedPlanner:
    def plan(self, task: Any, notes: str) -> Plan:
        return ScriptedPlan(parse_script(script_of(task)))


# --- an OpenAI-compatible chat endpoint

SYSTEM = """\
You are the workbench agent. You work in a persistent directory (the Computer),
through the tools you are given: paths are relative to it, commands run in it.
Take one step at a time. When the task is done, answer in plain text without
calling a tool. Messages from the user may arrive while you work: follow the
latest. Your notes from earlier turns:
{notes}"""
CHAT_TIMEOUT = 120.0


class ChatPlan:
    def __init__(self, planner: ChatPlanner, task: Any, notes: str) -> None:
        self._planner = planner
        task_text = task if isinstance(task, str) else json.dumps(task)
        self._messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM.format(notes=notes or "(none)")},
            {"role": "user", "content": task_text},
        ]
        self._steered: list[str] = []
        self._call_id: str | None = None

    def steer(self, text: str) -> None:
        self._steered.append(text)

    async def next(self, last: Observation | None) -> Step:
        if last is not None and self._call_id is not None:
            self._messages.append(
                {"role": "tool", "tool_call_id": self._call_id, "content": last.text}
            )
        # Steering arrives between steps, as the user's newest word.
        self._messages.extend({"role": "user", "content": text} for text in self._steered)
        self._steered.clear()
        reply = await self._planner.complete(self._messages)
        self._messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            self._call_id = None
            return Step(FINISH, {"answer": str(reply.get("content") or "")})
        call = calls[0]  # one step at a time: the others are not answered, so not run
        reply["tool_calls"] = [call]
        self._call_id = call["id"]
        name = call["function"]["name"]
        if name not in TOOLS:
            raise PlanError(f"the model called an unknown tool {name!r}")
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except json.JSONDecodeError as e:
            raise PlanError(f"the model's arguments for {name} are not JSON: {e}") from None
        return Step(name, {k: str(v) for k, v in arguments.items() if k in TOOL_ARGS[name]})


@dataclass(frozen=True)
class ChatPlanner:
    url: str
    key: str
    model: str

    def plan(self, task: Any, notes: str) -> Plan:
        return ChatPlan(self, task, notes)

    async def complete(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """One chat completion: the assistant's message."""
        import aiohttp  # only a chat planner needs it: the scripted one starts without

        body = {"model": self.model, "messages": messages, "tools": tool_schemas()}
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        timeout = aiohttp.ClientTimeout(total=CHAT_TIMEOUT)
        endpoint = self.url.rstrip("/") + "/chat/completions"
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.post(endpoint, json=body, headers=headers) as response,
            ):
                if response.status != 200:
                    text = await response.text()
                    raise PlanError(f"{endpoint} answered {response.status}: {text[:500]}")
                reply = await response.json()
        except aiohttp.ClientError as e:
            raise PlanError(f"{endpoint}: {e}") from None
        try:
            message: dict[str, Any] = reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise PlanError(f"{endpoint} answered no choice: {str(reply)[:500]}") from None
        return message


def tool_schemas() -> list[dict[str, Any]]:
    """The tools as chat-completions functions, every argument a required string."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {arg: {"type": "string"} for arg in TOOL_ARGS[name]},
                    "required": list(TOOL_ARGS[name]),
                },
            },
        }
        for name, description in TOOLS.items()
    ]
