"""A Session's settings as a pooled runner gets them at adoption: resolved as the
kubelet resolves them in a cold runner's pod spec (envFrom first, then env, a later
name winning), Secret values read in the Session's namespace; a missing Secret or
key is said, so the Session starts cold instead."""

from __future__ import annotations

import base64

import pytest

from helmr.operator.runners.session_settings import SettingsUnavailable, settings_values
from helmr.resources.session_env import (
    EnvSource,
    SecretKeyRef,
    SecretRef,
    SessionEnv,
    SessionEnvFrom,
    SessionEnvVar,
)
from tests.unit.operator.stub_kube import StubKube


class SecretKube(StubKube):
    def __init__(self, secrets: dict[tuple[str, str], dict[str, str]]) -> None:
        super().__init__()
        self.secrets = {
            key: {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
            for key, data in secrets.items()
        }
        self.read: list[tuple[str, str]] = []

    async def get_secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        self.read.append((namespace, name))
        return self.secrets.get((namespace, name))


def secret_key(name: str, secret: str, key: str) -> SessionEnvVar:
    ref = EnvSource(secret_key_ref=SecretKeyRef(name=secret, key=key))
    return SessionEnvVar(name=name, value_from=ref)


async def test_values_and_secret_keys_resolve_as_the_kubelet_would() -> None:
    kube = SecretKube(
        {("team", "llm"): {"api-key": "s3cret"}, ("team", "all"): {"TOKEN": "t", "MODEL": "x"}}
    )
    env = SessionEnv.of(
        [SessionEnvVar(name="MODEL", value="small"), secret_key("KEY", "llm", "api-key")],
        [SessionEnvFrom(secret_ref=SecretRef(name="all"), prefix="T_")],
    )
    assert await settings_values(kube, "team", env) == {
        "T_TOKEN": "t",
        "T_MODEL": "x",
        "MODEL": "small",
        "KEY": "s3cret",
    }
    assert set(kube.read) == {("team", "llm"), ("team", "all")}


async def test_plain_values_read_no_secret() -> None:
    kube = SecretKube({})
    env = SessionEnv.of([SessionEnvVar(name="MODEL", value="small")], None)
    assert await settings_values(kube, "team", env) == {"MODEL": "small"}
    assert kube.read == []


@pytest.mark.parametrize(
    "env",
    [
        SessionEnv.of([secret_key("KEY", "llm", "other")], None),
        SessionEnv.of([secret_key("KEY", "gone", "api-key")], None),
        SessionEnv.of(None, [SessionEnvFrom(secret_ref=SecretRef(name="gone"))]),
    ],
    ids=["missing-key", "missing-secret", "missing-env-from"],
)
async def test_a_missing_secret_or_key_is_said(env: SessionEnv) -> None:
    kube = SecretKube({("team", "llm"): {"api-key": "s3cret"}})
    with pytest.raises(SettingsUnavailable):
        await settings_values(kube, "team", env)
