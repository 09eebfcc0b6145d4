"""The workbench's manifests as a cluster reads them: its Actor, and a Session that
plans with a model whose key comes from a Secret (chat-session.yaml). Offline: the
runner pod the operator would build for it, never a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from helmr.operator.runners.pods import RunnerSpec, build_runner_pod_spec, runner_env
from helmr.resources import Actor, Session
from helmr.resources.session_env import SessionEnv

HERE = Path(__file__).parent


def manifest(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((HERE / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def runner_spec() -> RunnerSpec:
    actor = Actor.from_manifest(manifest("actor.yaml") | {"metadata": {"name": "workbench"}})
    session = Session.from_manifest(manifest("chat-session.yaml"))
    return RunnerSpec(
        namespace="default",
        session_name="workbench-chat",
        session_uid="uid",
        session_id="ses_1",
        epoch=1,
        actor=actor,
        runner_url="http://helmr:8081",
        claim_name="claim",
        session_env=SessionEnv.of(session.spec.env, session.spec.env_from),
    )


def test_the_chat_sessions_key_reaches_its_runner_pod_as_a_secret_reference() -> None:
    (container,) = build_runner_pod_spec(runner_spec())["spec"]["containers"]
    env = {var["name"]: var for var in container["env"]}

    assert env["WORKBENCH_CHAT_KEY"] == {
        "name": "WORKBENCH_CHAT_KEY",
        "valueFrom": {"secretKeyRef": {"name": "workbench-chat", "key": "api-key"}},
    }
    assert env["WORKBENCH_CHAT_URL"]["value"] == "https://api.openai.com/v1"
    assert env["WORKBENCH_CHAT_MODEL"]["value"] == "gpt-4o-mini"


def test_a_local_runner_gets_no_key_from_the_manifest() -> None:
    """``helmr dev`` has no Secrets: the key comes from the shell that started it."""
    names = {var["name"] for var in runner_env(runner_spec(), token_file="t", computer_dir="c")}

    assert "WORKBENCH_CHAT_KEY" not in names
    assert "WORKBENCH_CHAT_URL" in names
