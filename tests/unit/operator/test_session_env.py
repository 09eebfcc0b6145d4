"""A Session's own settings (``spec.env``, ``spec.envFrom``, or a start's ``env`` and
``env_from``) reach its runner in the pod spec on a cold start: values as values, Secret
keys as references the kubelet resolves, never the Secret's value in any Helmr object."""

from __future__ import annotations

from typing import Any

from helmr.operator.mirror.custom_resources import session_manifest
from helmr.operator.runners import pods
from helmr.operator.runners.fork_env import runner_env
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import ActorRef, ObjectMeta, Session, SessionSpec
from helmr.resources.session import ForkFrom
from helmr.resources.session_env import NO_ENV, SessionEnv, SessionEnvFrom, SessionEnvVar
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import ClusterKube, any_resource
from tests.unit.operator.test_volumes import _runner_spec as runner_spec

SECRET_KEY = {"valueFrom": {"secretKeyRef": {"name": "llm", "key": "api-key"}}}
ENV = SessionEnv(
    env=(
        SessionEnvVar.model_validate({"name": "MODEL", "value": "small"}),
        SessionEnvVar.model_validate({"name": "API_KEY", **SECRET_KEY}),
    ),
    env_from=(SessionEnvFrom.model_validate({"secretRef": {"name": "team"}, "prefix": "TEAM_"}),),
)


def container(pod: dict[str, Any]) -> dict[str, Any]:
    (runner,) = pod["spec"]["containers"]
    return dict(runner)


def test_a_runner_pod_gets_the_sessions_values_and_secret_references() -> None:
    runner = container(pods.build_runner_pod_spec(runner_spec(session_env=ENV)))
    env = {var["name"]: var for var in runner["env"]}
    assert env["MODEL"] == {"name": "MODEL", "value": "small"}
    assert env["API_KEY"] == {"name": "API_KEY", **SECRET_KEY}
    assert runner["envFrom"] == [{"secretRef": {"name": "team"}, "prefix": "TEAM_"}]


def test_the_sessions_variable_wins_over_the_actors_of_the_same_name() -> None:
    actor_env = [{"name": "MODEL", "value": "large"}, {"name": "REGION", "value": "eu"}]
    spec = runner_spec({"env": actor_env}, session_env=ENV)
    names = [var["name"] for var in container(pods.build_runner_pod_spec(spec))["env"]]
    assert names.count("MODEL") == 1
    env = {var["name"]: var for var in container(pods.build_runner_pod_spec(spec))["env"]}
    assert env["MODEL"]["value"] == "small"
    assert env["REGION"]["value"] == "eu"


def test_helmrs_own_variables_come_first_and_a_pod_without_settings_has_no_env_from() -> None:
    runner = container(pods.build_runner_pod_spec(runner_spec()))
    assert "envFrom" not in runner
    # Kubernetes gives env precedence over envFrom: a Secret's HELMR_ key overrides nothing.
    assert all(var["name"].startswith("HELMR_") for var in runner["env"])


async def test_an_api_session_object_carries_the_settings_the_start_named(h: Harness) -> None:
    view = await h.session()
    manifest = session_manifest(view, ENV).to_manifest()
    assert manifest["spec"]["env"] == [
        {"name": "MODEL", "value": "small"},
        {"name": "API_KEY", **SECRET_KEY},
    ]
    assert manifest["spec"]["envFrom"] == [{"secretRef": {"name": "team"}, "prefix": "TEAM_"}]
    assert "env" not in session_manifest(view).to_manifest()["spec"]


class SettingsKube(ClusterKube):
    """A cluster whose Sessions name ``ENV``, keeping each pod made."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: list[dict[str, Any]] = []

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        found = any_resource(kind, namespace, name)
        if kind is Session:
            found.spec.env, found.spec.env_from = list(ENV.env), list(ENV.env_from)
        return found

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        self.pods.append(body)
        return await super().create_pod(namespace, body)


async def test_the_supervisor_starts_a_runner_with_its_sessions_settings(h: Harness) -> None:
    kube = SettingsKube()
    supervisor = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())
    session = await h.session()
    await h.control.enqueue(session.id, "go")
    await supervisor.reconcile()  # reads its Actor: its limits
    await supervisor.reconcile()
    (pod,) = kube.pods
    assert container(pod)["envFrom"] == [{"secretRef": {"name": "team"}, "prefix": "TEAM_"}]
    assert {"name": "API_KEY", **SECRET_KEY} in container(pod)["env"]


class Sessions:
    """Session objects by name (a ResourceReader of Sessions only)."""

    def __init__(self, *sessions: Session) -> None:
        self.by_name = {str(s.metadata.name): s for s in sessions}

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        return self.by_name.get(name) if kind is Session else None


def _session(name: str, env: SessionEnv = NO_ENV, fork_of: str | None = None) -> Session:
    fork = None if fork_of is None else ForkFrom(session=fork_of, turn="turn_1")
    spec = SessionSpec(actor_ref=ActorRef(name="a"), workspace=name, fork_from=fork)
    spec.env, spec.env_from = list(env.env) or None, list(env.env_from) or None
    return Session(metadata=ObjectMeta(name=name, namespace="team"), spec=spec)


OWN = SessionEnv(env=(SessionEnvVar.model_validate({"name": "MODEL", "value": "large"}),))


async def test_a_fork_naming_no_settings_runs_with_its_sources_through_a_chain_of_forks() -> None:
    sessions = Sessions(
        _session("source", ENV), _session("fork", fork_of="source"), _session("x", fork_of="fork")
    )
    assert await runner_env(sessions, sessions.by_name["fork"]) == ENV
    assert await runner_env(sessions, sessions.by_name["x"]) == ENV


async def test_a_fork_naming_settings_runs_with_those_only_and_a_gone_source_gives_none() -> None:
    sessions = Sessions(_session("source", ENV), _session("own", OWN, fork_of="source"))
    assert await runner_env(sessions, sessions.by_name["own"]) == OWN
    orphan = _session("orphan", fork_of="deleted")
    assert await runner_env(Sessions(orphan), orphan) == NO_ENV
    looped = _session("loop", fork_of="loop")  # a manifest naming itself: ends
    assert await runner_env(Sessions(looped), looped) == NO_ENV
