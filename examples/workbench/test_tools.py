"""The workbench's planner and tools on their own: no control plane, no runner
(test_workbench.py drives the whole agent through ``helmr.testing``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from .planner import (
    FINISH,
    ChatPlanner,
    Observation,
    PlanError,
    ScriptedPlanner,
    Step,
    parse_script,
    planner_from_env,
)
from .tools import NOTES, Computer, ToolError, _group_alive, run_command


def test_a_script_is_one_step_a_line() -> None:
    script = """
    # set up
    write src/app.py: print('hi')\\nprint('bye')
    append log.txt: one
    replace src/app.py: hi => hello
    read src/app.py
    run python3 src/app.py
    note the app prints hello
    wait 5
    finish all done
    """
    assert parse_script(script) == [
        Step("write", {"path": "src/app.py", "content": "print('hi')\nprint('bye')"}),
        Step("append", {"path": "log.txt", "content": "one"}),
        Step("replace", {"path": "src/app.py", "old": "hi", "new": "hello"}),
        Step("read", {"path": "src/app.py"}),
        Step("run", {"command": "python3 src/app.py"}),
        Step("note", {"text": "the app prints hello"}),
        Step("wait", {"seconds": "5"}),
        Step(FINISH, {"answer": "all done"}),
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("fly away", "unknown step 'fly'"),
        ("write notes.txt", "write needs PATH: CONTENT"),
        ("replace a.txt: x", "replace needs PATH: OLD => NEW"),
        ("run", "run needs an argument"),
    ],
)
def test_a_line_the_script_cannot_read_is_named(line: str, says: str) -> None:
    with pytest.raises(PlanError, match=f"line 2 \\({line!r}\\): {says}"):
        parse_script(f"read a.txt\n{line}")


async def test_steering_replaces_the_steps_not_taken() -> None:
    plan = ScriptedPlanner().plan({"script": ["write a.txt: 1", "write b.txt: 2"]}, notes="")
    first = await plan.next(None)
    assert first == Step("write", {"path": "a.txt", "content": "1"})
    plan.steer("run echo steered")
    assert await plan.next(Observation(first, "wrote")) == Step("run", {"command": "echo steered"})
    assert await plan.next(None) == Step(FINISH, {"answer": "done: 2 steps"})


def test_the_chat_planner_is_chosen_only_when_configured() -> None:
    assert isinstance(planner_from_env({}), ScriptedPlanner)
    chat = planner_from_env({"WORKBENCH_CHAT_URL": "http://llm/v1", "WORKBENCH_CHAT_KEY": "k"})
    assert chat == ChatPlanner(url="http://llm/v1", key="k", model="gpt-4o-mini")


def test_files_are_written_edited_read_and_kept_inside_the_computer(tmp_path: Path) -> None:
    computer = Computer(tmp_path)
    computer.write("src/a.txt", "hello world")
    computer.append("src/a.txt", "\nagain")
    assert computer.replace("src/a.txt", "world", "there") == "replaced 1 of 'world' in src/a.txt"
    assert computer.read("src/a.txt") == "hello there\nagain"
    with pytest.raises(ToolError, match="does not contain 'absent'"):
        computer.replace("src/a.txt", "absent", "x")
    with pytest.raises(ToolError, match=r"\.\./escape is outside the Computer"):
        computer.write("../escape", "no")
    with pytest.raises(ToolError, match=r"missing\.txt is not a file"):
        computer.read("missing.txt")
    computer.note("turn 1: first")
    computer.note("turn 2: second")
    assert computer.notes() == "turn 1: first\nturn 2: second\n"
    assert (tmp_path / NOTES).is_file()


async def test_a_command_streams_its_lines_and_gets_no_helmr_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELMR_TOKEN", "secret")
    lines: list[str] = []
    never = asyncio.Event()
    status = await run_command(
        "echo one; echo two >&2; echo token=${HELMR_TOKEN:-none}; exit 3",
        tmp_path,
        lines.append,
        never.wait(),
    )
    assert status == 3
    assert lines == ["one", "two", "token=none"]


async def test_a_stopped_command_takes_its_children_with_it(tmp_path: Path) -> None:
    stop = asyncio.Event()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        stop.set()  # stop once it has started its child

    # The child ignores SIGTERM: it is killed after the grace period.
    command = (
        "sh -c 'trap \"\" TERM; echo $$ > child.pid; sleep 60' & sleep 0.2; echo started; wait"
    )
    before = open_fds()
    status = await run_command(command, tmp_path, on_line, stop.wait())
    assert status is None
    assert lines == ["started"]
    assert open_fds() == before, "the command's output pipe is left open"
    # Gone as the command returns, not a moment later: the turn ends next.
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_a_group_of_zombies_is_not_alive() -> None:
    alive = subprocess.Popen(["sleep", "60"], start_new_session=True)
    dead = subprocess.Popen(["true"], start_new_session=True)
    try:
        while not gone(dead.pid):
            time.sleep(0.01)
        os.killpg(dead.pid, 0)  # the zombie still counts for the kernel's own test
        assert _group_alive(alive.pid)
        assert not _group_alive(dead.pid)
    finally:
        alive.kill()
        alive.wait()
        dead.wait()
    assert not _group_alive(dead.pid)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def gone(pid: int) -> bool:
    """No such process, or only its zombie (killed; its new parent has not reaped it)."""
    try:
        os.kill(pid, 0)
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True


# --- the chat planner against an OpenAI-compatible endpoint served here


class FakeModel:
    """A chat completions endpoint that answers with queued replies, keeping the requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer key"
        self.requests.append(await request.json())
        if self.status != 200:
            return web.Response(status=self.status, text="overloaded")
        return web.json_response({"choices": [{"message": self.replies.pop(0)}]})


def tool_call(name: str, **arguments: str) -> dict[str, Any]:
    call = {"id": f"call_{name}", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.fixture
async def model() -> AsyncIterator[tuple[FakeModel, ChatPlanner]]:
    fake = FakeModel()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    async with TestServer(app) as server:
        yield fake, ChatPlanner(url=str(server.make_url("/v1")), key="key", model="m")


async def test_the_chat_planner_turns_tool_calls_into_steps_and_hears_steering(
    model: tuple[FakeModel, ChatPlanner],
) -> None:
    fake, planner = model
    fake.replies = [
        tool_call("write", path="a.txt", content="hi"),
        tool_call("run", command="cat a.txt"),
        {"role": "assistant", "content": "a.txt says hi"},
    ]
    plan = planner.plan("make a.txt", notes="turn 1: earlier")
    first = await plan.next(None)
    assert first == Step("write", {"path": "a.txt", "content": "hi"})
    assert "turn 1: earlier" in fake.requests[0]["messages"][0]["content"]
    assert {t["function"]["name"] for t in fake.requests[0]["tools"]} >= {"write", "run", "note"}
    plan.steer("also show it")
    second = await plan.next(Observation(first, "wrote 2 characters to a.txt"))
    assert second == Step("run", {"command": "cat a.txt"})
    sent = fake.requests[1]["messages"]
    assert sent[-2] == {
        "role": "tool",
        "tool_call_id": "call_write",
        "content": "wrote 2 characters to a.txt",
    }
    assert sent[-1] == {"role": "user", "content": "also show it"}
    assert await plan.next(Observation(second, "exit 0\nhi")) == Step(
        FINISH, {"answer": "a.txt says hi"}
    )


async def test_an_endpoint_that_fails_fails_the_plan_saying_so(
    model: tuple[FakeModel, ChatPlanner],
) -> None:
    fake, planner = model
    fake.status = 503
    with pytest.raises(PlanError, match="answered 503: overloaded"):
        await planner.plan("anything", notes="").next(None)
