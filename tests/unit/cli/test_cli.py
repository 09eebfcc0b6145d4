"""The `helmr` command against a live app on loopback.

Each command runs in a worker thread (it runs its own event loop) while this
test's loop serves the API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from helmr.cli import main
from tests.unit.api import (
    ADMIN,
    NAMESPACE,
    Api,
)
from tests.unit.control.harness import DEFAULT_LIMITS as DEFAULTS
from tests.unit.server.test_fork_env import forkable


class Cli:
    def __init__(self, api: Api) -> None:
        self.env = {"HELMR_URL": api.url, "HELMR_TOKEN": ADMIN, "HELMR_NAMESPACE": NAMESPACE}

    async def __call__(
        self, *args: str, code: int = 0, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        runner = CliRunner()
        result = await asyncio.to_thread(
            runner.invoke, main, list(args), input=stdin, env={**self.env, **(env or {})}
        )
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    async def json(self, *args: str, code: int = 0, stdin: str | None = None) -> Any:
        return json.loads((await self("--json", *args, code=code, stdin=stdin)).stdout)


@pytest.fixture
def cli(api: Api) -> Cli:
    return Cli(api)


async def test_start_get_enqueue_and_turn_reads(api: Api, cli: Cli) -> None:
    started = await cli.json(
        "session", "start", "reviewer", "-w", "ws", "--key", "k", "--idempotency-key", "once"
    )
    sid = started["session"]["id"]
    assert (started["session"]["status"], started["run"]) == ("open", None)
    human = await cli("session", "start", "reviewer", "-w", "ws", "--idempotency-key", "once")
    assert sid in human.stdout
    assert "team-a/reviewer on workspace ws" in human.stdout

    assert (await cli.json("session", "get", sid))["key"] == "k"
    turn = await cli.json("session", "enqueue", sid, '{"issue": 42}', "--idempotency-key", "i")
    assert (turn["sequence"], turn["input"]) == (1, {"issue": 42})
    from_stdin = await cli.json("session", "enqueue", sid, "-", stdin='"text input"')
    assert from_stdin["input"] == "text input"

    got = await cli.json("session", "turn", "get", sid, turn["id"])
    assert got["status"] == "queued"
    waited = await cli("session", "turn", "wait", sid, turn["id"], "--timeout", "0", code=124)
    assert "timed out; the turn goes on" in waited.stdout

    tid, headers = await api.run_turn(sid)
    await api.call(
        "POST",
        f"/runner/v1/sessions/{sid}/turns/{tid}/respond",
        headers=headers,
        json={"value": "The build is green."},
    )
    await api.call(
        "POST",
        f"/runner/v1/sessions/{sid}/turns/{tid}/complete",
        headers=headers,
        json={"result": {"status": "green"}},
    )
    done = await cli("session", "turn", "wait", sid, tid)
    assert "completed" in done.stdout
    assert 'result    {"status":"green"}' in done.stdout
    assert 'response  "The build is green."' in done.stdout


async def test_send_interrupt_resume_cancel_close(api: Api, cli: Cli) -> None:
    sid = (await cli.json("session", "start", "reviewer", "-w", "ws"))["session"]["id"]
    enqueued = await cli.json("session", "send", sid, '{"q": 1}')
    assert (enqueued["kind"], enqueued["message"]) == ("enqueued", None)
    refused = await cli("session", "send", sid, "1", "--turn", enqueued["turn"]["id"], code=1)
    assert "turn_not_active" in refused.stderr
    assert "hint:" in refused.stderr

    tid, _ = await api.run_turn(sid)
    messaged = await cli("session", "send", sid, '{"type": "hint"}')
    assert f"admitted for turn {tid}" in messaged.stdout
    exact = await cli.json("session", "send", sid, '"stop"', "--turn", tid)
    assert (exact["turn_id"], exact["data"]) == (tid, "stop")

    held = await cli("session", "interrupt", sid)
    hold_id = (await cli.json("session", "get", sid))["hold"]["hold_id"]
    assert f"--hold-id {hold_id}" in held.stdout
    assert "resume it first" in (await cli("session", "send", sid, "1", code=1)).stderr
    early = await cli("session", "resume", sid, "--hold-id", hold_id, code=1)
    assert "hold_not_converged" in early.stderr  # the interrupted Turn is still stopping
    epoch = (await api.control.get_session(sid)).process_epoch
    await api.control.process_exited(sid, epoch, 0)  # its process let go of it
    assert (await cli.json("session", "resume", sid, "--hold-id", hold_id))["hold"] is None

    cancelled = await cli.json("session", "cancel", sid, "--idempotency-key", "stop")
    assert cancelled["cancel_requested_at"] is not None
    other = (await cli.json("session", "start", "reviewer", "-w", "ws-2"))["session"]["id"]
    assert "closed (close)" in (await cli("session", "close", other)).stdout


async def test_events_page_and_follow(cli: Cli) -> None:
    sid = (await cli.json("session", "start", "reviewer", "-w", "ws"))["session"]["id"]
    for n in range(3):
        await cli("session", "enqueue", sid, str(n))
    page = await cli.json("session", "events", sid, "--after", "1", "--limit", "1")
    assert [r["sequence"] for r in page["records"]] == [2]
    assert (page["next_after"], page["has_more"]) == (2, True)
    human = await cli("session", "events", sid, "--limit", "2")
    assert human.stdout.splitlines()[0].split()[1:3] == ["1", "turn.queued"]
    assert "more: --after 2" in human.stderr

    await cli("session", "cancel", sid)
    followed = await cli("--json", "session", "events", sid, "--follow", "--after", "3")
    records = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [r["sequence"] for r in records] == [4, 5, 6, 7]
    assert records[-1]["kind"] == "session.closed"
    readable = await cli("session", "events", sid, "--follow", "--after", "6")
    assert readable.stdout.split()[1:] == ["7", "session.closed", "-", "closed", "(cancel)"]


async def test_errors_say_what_to_do(api: Api, cli: Cli) -> None:
    missing = await cli("session", "get", "ses_nope", code=1)
    assert "not_found: no session ses_nope" in missing.stderr
    stranger = await cli("session", "get", "ses_nope", code=1, env={"HELMR_TOKEN": "wrong"})
    assert "HELMR_TOKEN" in stranger.stderr
    bad_json = await cli("session", "enqueue", "ses_x", "{nope", code=2)
    assert "must be JSON" in bad_json.stderr
    no_url = await cli("session", "get", "ses_x", code=2, env={"HELMR_URL": ""})
    assert "HELMR_URL" in no_url.stderr
    down = await cli("session", "get", "ses_x", code=3, env={"HELMR_URL": "http://127.0.0.1:9"})
    assert "cannot reach the Helmr API at http://127.0.0.1:9" in down.stderr


async def test_workspace_get_and_delete(api: Api, cli: Cli) -> None:
    sid = await api.start()
    held = await cli("workspace", "get", f"{NAMESPACE}/ws")
    assert f"held by   {sid}" in held.stdout
    refused = await cli("workspace", "delete", f"{NAMESPACE}/ws", code=1)
    assert "conflict" in refused.stderr
    assert sid in refused.stderr
    await api.call("POST", f"/v1/sessions/{sid}/close", json={})
    deleted = await cli.json("workspace", "delete", f"{NAMESPACE}/ws")
    assert (deleted["id"], deleted["held_by"]) == (f"{NAMESPACE}/ws", None)
    bad = await cli("workspace", "get", "ws", code=2)
    assert "NAMESPACE/WORKSPACE" in bad.stderr or "<namespace>/<name>" in bad.stderr


async def test_a_full_queue_is_refused_with_a_hint(api: Api, cli: Cli) -> None:
    """queueLimit: admission beyond it is refused; the CLI says so and what to do."""
    sid = (await cli.json("session", "start", "reviewer", "-w", "ws"))["session"]["id"]
    await api.control.resolve_limits(sid, dataclasses.replace(DEFAULTS, queue_limit=1))
    await cli("session", "enqueue", sid, "1")

    refused = await cli("session", "enqueue", sid, "2", code=1)

    assert "queue_full" in refused.stderr
    assert "hint: the session holds its Actor's queueLimit" in refused.stderr


# --- session start --env, --env-secret, --env-from


async def test_start_names_values_secret_keys_and_secrets(api: Api, cli: Cli) -> None:
    started = await cli.json(
        "session",
        "start",
        "reviewer",
        "-w",
        "ws",
        "--env",
        "MODEL=small=fast",
        "--env-secret",
        "KEY=llm:api-key",
        "--env-from",
        "team",
    )
    env = api.mirror.envs[started["session"]["id"]]
    assert [var.model_dump(mode="json", exclude_none=True) for var in env.env] == [
        {"name": "MODEL", "value": "small=fast"},
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "api-key"}}},
    ]
    assert [source.secret_ref.name for source in env.env_from] == ["team"]


async def test_fork_names_its_own_settings_or_none_to_run_with_its_sources(
    api: Api, cli: Cli
) -> None:
    source, turn = await forkable(api)
    own = await cli.json("session", "fork", source, "--at-turn", turn, "-w", "own", "--env", "M=l")
    env = api.mirror.envs[own["id"]]
    assert [var.model_dump(mode="json", exclude_none=True) for var in env.env] == [
        {"name": "M", "value": "l"}
    ]
    inherits = await cli.json("session", "fork", source, "--at-turn", turn, "-w", "inherits")
    assert not api.mirror.envs[inherits["id"]]
    assert api.mirror.forks[inherits["id"]].turn == turn


async def test_a_malformed_setting_is_refused_naming_its_option(api: Api, cli: Cli) -> None:
    refused = await cli(
        "session", "start", "reviewer", "-w", "ws", "--env-secret", "KEY=llm", code=2
    )
    assert "--env-secret" in refused.stderr
    refused = await cli("session", "start", "reviewer", "-w", "ws", "--env", "MODEL", code=2)
    assert "--env" in refused.stderr
    assert api.mirror.sessions == []
