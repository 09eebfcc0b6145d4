"""A fork's environment (issue 28): the fork's Session object names its source
(``spec.forkFrom``) and, naming no settings of its own, its runners get the
source's; a fork request naming ``env`` or ``env_from`` gets those only."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.client import Client
from helmr.resources.session import ForkFrom
from tests.unit.api import ADMIN, NAMESPACE, Api
from tests.unit.server.test_session_env import wire


async def forkable(api: Api) -> tuple[str, str]:
    """A Session started with settings, with a completed Turn whose save is ready."""
    source = await api.start(
        env={"MODEL": "small"}, env_from=[{"secret": "team", "prefix": "TEAM_"}]
    )
    await api.control.align_saves(NAMESPACE, "ws", True)
    await api.enqueue(source, "work")
    turn, headers = await api.run_turn(source)
    base = f"/runner/v1/sessions/{source}"
    await api.call("POST", f"{base}/turns/{turn}/complete", headers=headers, json={})
    await api.control.take_save(NAMESPACE, "ws", 1)
    await api.control.save_ready(NAMESPACE, "ws", 1)
    return source, turn


async def test_a_fork_names_its_source_and_no_settings_of_its_own(api: Api) -> None:
    source, turn = await forkable(api)
    reply = await api.call(
        "POST", f"/v1/sessions/{source}/fork", json={"at_turn": turn, "workspace": "forked"}
    )
    forked = reply["session"]["id"]
    name = (await api.control.get_session(source)).name
    assert api.mirror.forks[forked] == ForkFrom(session=name, turn=turn)
    assert not api.mirror.envs[forked]  # its runners get the source's (runner_env)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"env": {"MODEL": "large"}}, ([{"name": "MODEL", "value": "large"}], [])),
        ({"env_from": ["other"]}, ([], [{"secretRef": {"name": "other"}}])),
    ],
)
async def test_a_fork_naming_settings_gets_those_only(
    api: Api, settings: dict[str, Any], expected: tuple[list[Any], list[Any]]
) -> None:
    source, turn = await forkable(api)
    async with Client(api.url, ADMIN) as client:
        forked = await client.sessions.fork(source, at_turn=turn, workspace="forked", **settings)
    assert wire(api.mirror.envs[forked.id]) == expected
    assert forked.id in api.mirror.forks


async def test_a_forks_bad_setting_is_a_400_naming_it(api: Api) -> None:
    source, turn = await forkable(api)
    body = {"at_turn": turn, "env_from": [{"secret": "s", "prefix": "HELMR_"}]}
    reply = await api.call("POST", f"/v1/sessions/{source}/fork", json=body, status=400)
    errors = reply["error"]["details"]["errors"]
    assert ["body", "env_from", "0", "prefix"] in [err["loc"] for err in errors], errors
