"""A start's ``env`` and ``env_from`` reach the Session's object (the mirror), are
checked as its CRD checks them (a 400 naming the field), and appear in no reply."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helmr.client import Client, SecretKeyRef, SessionEnvFrom
from tests.unit.api import ADMIN, NAMESPACE, Api

PATH = f"/v1/namespaces/{NAMESPACE}/actors/reviewer/sessions"
SECRET_KEY = {"secretKeyRef": {"name": "llm", "key": "api-key"}}


async def test_a_starts_settings_reach_the_sessions_object_and_no_reply(api: Api) -> None:
    body = {
        "workspace": "ws",
        "env": [
            {"name": "MODEL", "value": "small-model"},
            {"name": "KEY", "valueFrom": SECRET_KEY},
        ],
        "env_from": [{"secretRef": {"name": "team"}}],
    }
    reply = await api.call("POST", PATH, json=body)
    sid = reply["session"]["id"]
    env = api.mirror.envs[sid]
    assert [var.name for var in env.env] == ["MODEL", "KEY"]
    assert env.env[1].value_from is not None
    assert env.env[1].value_from.secret_key_ref.name == "llm"
    assert [source.secret_ref.name for source in env.env_from] == ["team"]
    # The Session's view and timeline say nothing of them.
    assert "small-model" not in json.dumps(reply)
    assert "small-model" not in json.dumps(await api.call("GET", f"/v1/sessions/{sid}"))
    assert "small-model" not in json.dumps(await api.call("GET", f"/v1/sessions/{sid}/events"))


@pytest.mark.parametrize(
    ("env", "loc"),
    [
        ([{"name": "HELMR_URL", "value": "x"}], ["body", "env", "0", "name"]),
        ([{"name": "A"}], ["body", "env", "0"]),
        ([{"name": "A", "value": "x", "valueFrom": SECRET_KEY}], ["body", "env", "0"]),
        ([{"name": "A", "value": "x"}, {"name": "A", "value": "y"}], ["body", "env"]),
        ([{"name": "1A", "value": "x"}], ["body", "env", "0", "name"]),
        ([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}], None),
    ],
)
async def test_a_bad_setting_is_a_400_naming_it(
    api: Api, env: list[dict[str, Any]], loc: list[Any] | None
) -> None:
    body = await api.call("POST", PATH, json={"workspace": "ws", "env": env}, status=400)
    assert body["error"]["code"] == "invalid_input"
    errors = body["error"]["details"]["errors"]
    if loc is not None:
        assert errors[0]["loc"] == loc
    assert all(err["loc"][:2] == ["body", "env"] for err in errors)
    assert api.mirror.sessions == []


async def test_a_reserved_prefix_is_refused(api: Api) -> None:
    body = {"workspace": "ws", "env_from": [{"secretRef": {"name": "s"}, "prefix": "HELMR_"}]}
    reply = await api.call("POST", PATH, json=body, status=400)
    assert reply["error"]["details"]["errors"][0]["loc"] == ["body", "env_from", "0", "prefix"]


async def test_the_client_names_values_and_secret_keys(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, _ = await client.actors.start(
            "reviewer",
            namespace=NAMESPACE,
            workspace="ws",
            env={"MODEL": "small", "KEY": SecretKeyRef(name="llm", key="api-key")},
            env_from=[
                "team",
                SessionEnvFrom.model_validate({"secretRef": {"name": "more"}, "prefix": "M_"}),
            ],
        )
    env = api.mirror.envs[session.id]
    wire = [var.model_dump(mode="json", exclude_none=True) for var in env.env]
    assert wire == [{"name": "MODEL", "value": "small"}, {"name": "KEY", "valueFrom": SECRET_KEY}]
    sources = [source.model_dump(mode="json", exclude_none=True) for source in env.env_from]
    assert sources == [
        {"secretRef": {"name": "team"}},
        {"secretRef": {"name": "more"}, "prefix": "M_"},
    ]


async def test_the_client_sends_no_settings_unless_named(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, _ = await client.actors.start("reviewer", namespace=NAMESPACE, workspace="ws")
    assert not api.mirror.envs[session.id]
