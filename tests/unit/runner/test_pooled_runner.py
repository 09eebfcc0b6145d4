"""A pooled runner (``HELMR_POOL``): no Session in its environment; it long-polls
``adoption`` with its pod's token, then runs as the Session it was answered, with the
Session's settings in its environment before ``run`` reads them, its first ``receive``
sent on the connection its adoption was answered on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from helmr.protocol import contract, routes
from helmr.runner import Session, actor
from helmr.runner.entrypoint import Config, InitError, _adopted_then_serve, wait_for_adoption


def environ(tmp_path: Path, url: str = "http://cp") -> dict[str, str]:
    token = tmp_path / "token"
    token.write_text("pod-token")
    return {
        contract.ENV_URL: url,
        contract.ENV_POOL: "reviewer",
        contract.ENV_TOKEN_FILE: str(token),
        contract.ENV_ENTRYPOINT: "m:a",
        contract.ENV_IDLE_TIMEOUT: "30",
    }


def test_a_pooled_runner_needs_no_session_until_adopted(tmp_path: Path) -> None:
    config = Config.from_environ(environ(tmp_path))
    assert (config.pool, config.session_id, config.epoch) == ("reviewer", "", 0)
    without = environ(tmp_path)
    del without[contract.ENV_POOL]
    with pytest.raises(InitError, match=contract.ENV_PROCESS_EPOCH):
        Config.from_environ(without)


async def test_it_polls_until_adopted_and_takes_the_sessions_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str | None, dict[str, Any]]] = []

    async def adoption(request: web.Request) -> web.Response:
        asked.append((request.headers.get("Authorization"), await request.json()))
        if len(asked) == 1:  # the first poll times out: it polls again
            error = {"error": {"code": "receive_timeout", "message": "none yet"}}
            return web.json_response(error, status=408)
        reply = {"session_id": "ses_1", "namespace": "team", "epoch": 1, "env": {"MODEL": "m"}}
        return web.json_response(reply | {"idle_timeout": None})

    app = web.Application()
    app.router.add_post(routes.ADOPTION, adoption)
    monkeypatch.delenv("MODEL", raising=False)
    async with TestServer(app) as server:
        config = Config.from_environ(environ(tmp_path, str(server.make_url(""))))
        answer = await wait_for_adoption(config)
    assert [auth for auth, _ in asked] == ["Bearer pod-token"] * 2
    assert asked[0][1] == {"timeout": 60.0}
    assert os.environ["MODEL"] == "m"
    adopted = config.adopted(answer)
    # The pod's own warm wait stays unless the Session's answer names one.
    assert (adopted.session_id, adopted.epoch, adopted.idle_timeout) == ("ses_1", 1, 30.0)


async def test_its_first_receive_goes_on_the_connection_its_adoption_was_answered_on(
    tmp_path: Path,
) -> None:
    connections: list[tuple[str, int]] = []

    async def adoption(request: web.Request) -> web.Response:
        connections.append(("adoption", id(request.transport)))
        return web.json_response({"session_id": "ses_1", "namespace": "team", "epoch": 1})

    async def receive(request: web.Request) -> web.Response:
        connections.append(("receive", id(request.transport)))
        return web.json_response({"closed": True})

    received: list[object] = []

    async def run(session: Session) -> None:
        received.append(await session.receive())

    app = web.Application()
    app.router.add_post(routes.ADOPTION, adoption)
    app.router.add_post(routes.receive("ses_1"), receive)
    async with TestServer(app) as server:
        config = Config.from_environ(environ(tmp_path, str(server.make_url(""))))
        assert await _adopted_then_serve(actor(id="a", run=run), config) == 0

    assert received == [None]  # closed: its run ended
    [(_, adopted), (_, first)] = connections
    assert first == adopted
