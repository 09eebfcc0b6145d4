"""A start's ``env`` and ``env_from`` reach the Session's object (the mirror), are
checked as its CRD checks them (a 400 naming the field), and appear in no reply."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helmr.client import Client, SecretKey, SecretSource
from helmr.resources.session_env import SessionEnv
from tests.unit.api import ADMIN, NAMESPACE, Api

PATH = f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions"
SECRET_KEY = {"secretKeyRef": {"name": "llm", "key": "api-key"}}


def wire(env: SessionEnv) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The settings as the Session's ``spec.env`` and ``spec.envFrom`` hold them."""
    return (
        [var.model_dump(mode="json", exclude_none=True) for var in env.env],
        [source.model_dump(mode="json", exclude_none=True) for source in env.env_from],
    )


async def test_a_starts_settings_reach_the_sessions_object_and_no_reply(api: Api) -> None:
    body = {
        "workspace": "ws",
        "env": {"MODEL": "small-model", "KEY": {"secret": "llm", "key": "api-key"}},
        "env_from": [{"secret": "team"}, {"secret": "more", "prefix": "M_"}],
    }
    reply = await api.call("POST", PATH, json=body)
    sid = reply["session"]["id"]
    assert wire(api.mirror.envs[sid]) == (
        [{"name": "MODEL", "value": "small-model"}, {"name": "KEY", "valueFrom": SECRET_KEY}],
        [{"secretRef": {"name": "team"}}, {"secretRef": {"name": "more"}, "prefix": "M_"}],
    )
    # The Session's view and timeline say nothing of them.
    assert "small-model" not in json.dumps(reply)
    assert "small-model" not in json.dumps(await api.call("GET", f"/v1/sessions/{sid}"))
    assert "small-model" not in json.dumps(await api.call("GET", f"/v1/sessions/{sid}/events"))


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"env": {"HELMR_URL": "x"}}, ["body", "env", "HELMR_URL", "[key]"]),
        ({"env": {"1A": "x"}}, ["body", "env", "1A", "[key]"]),
        ({"env": {"A": {"secret": "llm"}}}, ["body", "env", "A", "SecretKey", "key"]),
        (
            {"env": {"A": {"secret": "Bad_Name", "key": "k"}}},
            ["body", "env", "A", "SecretKey", "secret"],
        ),
        ({"env": {"A": {"name": "llm", "key": "k"}}}, ["body", "env", "A", "SecretKey", "secret"]),
        ({"env_from": [{"secret": "s", "prefix": "HELMR_"}]}, ["body", "env_from", "0", "prefix"]),
        ({"env_from": [{"name": "s"}]}, ["body", "env_from", "0", "secret"]),
    ],
)
async def test_a_bad_setting_is_a_400_naming_it(
    api: Api, body: dict[str, Any], loc: list[str]
) -> None:
    reply = await api.call("POST", PATH, json={"workspace": "ws", **body}, status=400)
    assert reply["error"]["code"] == "invalid_input"
    errors = reply["error"]["details"]["errors"]
    assert loc in [err["loc"] for err in errors], errors
    assert api.mirror.sessions == []


async def test_the_client_names_values_secret_keys_and_secrets(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, _ = await client.actors.start(
            "reviewer",
            namespace=NAMESPACE,
            workspace="ws",
            env={"MODEL": "small", "KEY": SecretKey(secret="llm", key="api-key")},
            env_from=["team", SecretSource(secret="more", prefix="M_")],
        )
    assert wire(api.mirror.envs[session.id]) == (
        [{"name": "MODEL", "value": "small"}, {"name": "KEY", "valueFrom": SECRET_KEY}],
        [{"secretRef": {"name": "team"}}, {"secretRef": {"name": "more"}, "prefix": "M_"}],
    )


async def test_the_client_sends_no_settings_unless_named(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, _ = await client.actors.start("reviewer", namespace=NAMESPACE, workspace="ws")
    assert not api.mirror.envs[session.id]
