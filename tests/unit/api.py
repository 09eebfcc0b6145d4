"""What the server, client and CLI tests call the API with (no tests here).

:class:`Api` is what the ``api`` fixture (``conftest.py``) gives: the real app
(``build_app``) over the real ``Control`` and a SQLite store in a temporary
directory, served on loopback by aiohttp's test server, with static tokens.
Nothing is faked but Kubernetes (the authenticator and the mirror).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import JsonValue

from helmr.control import SessionView, TurnView
from helmr.control.control import Control
from helmr.protocol import EPOCH_HEADER
from helmr.resources.session import ForkFrom
from helmr.resources.session_env import SessionEnv
from helmr.server import Grant, StaticRunnerTokens, User

NAMESPACE = "team-a"
ADMIN = "admin-token"  # every verb in every namespace
READER = "reader-token"  # get, in team-a only
OUTSIDER = "outsider-token"  # every verb, in team-b only

GRANTS = {
    ADMIN: Grant(User("admin")),
    READER: Grant(User("reader"), frozenset({NAMESPACE}), frozenset({"get"})),
    OUTSIDER: Grant(User("outsider"), frozenset({"team-b"})),
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class RecordingMirror:
    """The operator's Mirror (and Workspace deleter), recording what it was asked to do."""

    sessions: list[str] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)
    deleted_workspaces: list[str] = field(default_factory=list)
    envs: dict[str, SessionEnv] = field(default_factory=dict)
    forks: dict[str, ForkFrom] = field(default_factory=dict)
    broken: bool = False  # as when the apiserver is unreachable

    async def session_started(
        self, session: SessionView, env: SessionEnv, fork_from: ForkFrom | None = None
    ) -> None:
        self._check()
        self.sessions.append(session.id)
        self.envs[session.id] = env
        if fork_from is not None:
            self.forks[session.id] = fork_from

    async def turn_enqueued(self, session: SessionView, turn: TurnView) -> None:
        assert turn.session_id == session.id
        self._check()
        self.turns.append(turn.id)

    async def delete_workspace(self, namespace: str, name: str) -> None:
        self._check()
        self.deleted_workspaces.append(f"{namespace}/{name}")

    def _check(self) -> None:
        if self.broken:
            raise ConnectionRefusedError("apiserver unreachable")


@dataclass
class Api:
    control: Control
    app: web.Application
    http: TestClient[Any, Any]
    runner_tokens: StaticRunnerTokens
    mirror: RecordingMirror

    own_runner_url: str | None = None
    """The runner API's own port's URL, when it has one (the ``runner_port`` fixture)."""

    @property
    def url(self) -> str:
        return str(self.http.make_url("")).rstrip("/")

    @property
    def runner_url(self) -> str:
        """Where runners call: the runner API's own port, else beside the public API."""
        return self.own_runner_url or self.url

    async def call(
        self, method: str, path: str, *, token: str = ADMIN, status: int = 200, **kwargs: Any
    ) -> Any:
        """The JSON reply of a request, which must answer ``status``."""
        headers = {**bearer(token), **kwargs.pop("headers", {})}
        async with self.http.request(method, path, headers=headers, **kwargs) as response:
            body = await response.json()
            assert response.status == status, body
            return body

    async def start(self, workspace: str = "ws", **body: Any) -> str:
        reply = await self.call(
            "POST",
            f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions",
            json={"workspace": workspace, **body},
        )
        session_id: str = reply["session"]["id"]
        return session_id

    async def enqueue(self, session_id: str, input: JsonValue = None, **body: Any) -> str:
        reply = await self.call(
            "POST", f"/v1/sessions/{session_id}/turns", json={"input": input, **body}
        )
        turn_id: str = reply["id"]
        return turn_id

    async def runner(self, session_id: str) -> dict[str, str]:
        """Starts a runner process for the session (the operator's part); its call headers."""
        epoch = await self.control.process_started(session_id)
        token = f"runner-{session_id}"
        self.runner_tokens.issue(session_id, token)
        return {**bearer(token), EPOCH_HEADER: str(epoch)}

    async def run_turn(self, session_id: str) -> tuple[str, dict[str, str]]:
        """Starts a process and has it receive the next turn; (turn id, runner headers)."""
        headers = await self.runner(session_id)
        reply = await self.call(
            "POST",
            f"/runner/v1/sessions/{session_id}/receive",
            headers=headers,
            json={"timeout": 5},
        )
        turn_id: str = reply["id"]
        return turn_id, headers
