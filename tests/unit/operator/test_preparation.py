"""The operator's side of preparation and limits (issue 9, items 3 and 4).

spec/001: "preparation exhaustion terminates the Session". The supervisor
reads a Session's Actor once (its limits), fails a Session whose Actor never
appears, reports a pod the apiserver refused and a pod not running by its
deadline; the pod handler's reading of a pod that cannot start is checked
on the pod bodies the kubelet writes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from helmr.kube.errors import translated
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.preparation import container_started, failed_preparation, pending_detail
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.protocol import ActorSettings
from helmr.resources import API_VERSION
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube

IMAGE = "registry.invalid/helmr/missing:1"
UNSCHEDULABLE = "0/1 nodes are available: 1 Insufficient cpu."


class Cluster(StubKube):
    """An apiserver holding what the test put in it: Actor and Session specs, pods."""

    def __init__(self, actor: dict[str, Any] | None, session: dict[str, Any] | None = None):
        super().__init__()
        self.specs: dict[str, dict[str, Any] | None] = {
            "Actor": actor,
            "Session": session or {"actorRef": {"name": "reviewer"}, "workspace": "ws"},
            "Workspace": {},
        }
        self.pods: dict[str, dict[str, Any]] = {}
        self.refuse_pods = False

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        spec = self.specs.get(kind.KIND)
        if spec is None:
            return None
        meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
        return kind.from_manifest(
            {"apiVersion": API_VERSION, "kind": kind.KIND, "metadata": meta, "spec": spec}
        )

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> None:
        pass

    async def list_claims(self, namespace: str, selector: str) -> list[str]:
        return []

    async def ensure_service_account(self, namespace: str, body: dict[str, Any]) -> None:
        pass

    async def create_pod(self, namespace: str, body: dict[str, Any]) -> str:
        if self.refuse_pods:
            error = ApiException(status=422, reason="Unprocessable Entity")
            error.body = "spec.containers[0].resources: Invalid value"
            raise translated(error)
        self.pods[body["metadata"]["name"]] = body
        return f"uid-{body['metadata']['name']}"

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)


def actor_spec(**fields: Any) -> dict[str, Any]:
    return {"image": IMAGE, "entrypoint": "echo.echo:echo", **fields}


def supervisor(h: Harness, kube: Cluster) -> Supervisor:
    settings = Settings(actor_grace=timedelta(seconds=30))
    return Supervisor(h.control, kube, RunnerPods(), settings, OperatorMetrics(), clock=h.clock)


async def with_work(h: Harness, kube: Cluster) -> tuple[str, Supervisor]:
    """A Session with a queued Turn, and the supervisor over ``kube``."""
    session = await h.session()
    await h.control.enqueue(session.id, "go")
    return session.id, supervisor(h, kube)


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": "runner", "image": IMAGE}]},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"state": {"waiting": {"reason": reason, "message": message}}}],
        },
    }


async def test_the_first_pass_resolves_the_limits_from_the_actor_and_session(h: Harness) -> None:
    """The limits are resolved once when a Session opens (Session override, else Actor)."""
    kube = Cluster(
        actor_spec(queueLimit=3, maxDurationSeconds=600, ttlSeconds=60, retry={"maxAttempts": 2}),
        {"actorRef": {"name": "reviewer"}, "workspace": "ws", "idleTimeoutSeconds": 9},
    )
    session = await h.session()

    await supervisor(h, kube).reconcile()

    limits = (await h.control.get_session(session.id)).limits
    assert limits is not None
    assert (limits.queue_limit, limits.idle_timeout_seconds, limits.retry_max_attempts) == (3, 9, 2)
    assert (limits.max_run_duration, limits.idle_ttl) == (
        timedelta(seconds=600),
        timedelta(seconds=60),
    )


async def test_what_a_silent_actor_leaves_unset_the_code_can_set(h: Harness) -> None:
    """An Actor with no queueLimit nor retry.maxAttempts resolves them unset (the defaults
    apply), so the actor's code can set them when its first Run reports."""
    kube = Cluster(actor_spec(retry={"backoffSeconds": 1}))
    session_id, passes = await with_work(h, kube)
    await passes.reconcile()
    shown = (await h.control.get_session(session_id)).limits
    assert shown is not None
    assert (shown.queue_limit, shown.retry_max_attempts) == (100, 3)

    epoch = (await h.control.get_session(session_id)).process_epoch
    await h.control.take_code_settings(session_id, epoch, ActorSettings(queue=4, retry=6))

    taken = (await h.control.get_session(session_id)).limits
    assert taken is not None
    assert (taken.queue_limit, taken.retry_max_attempts) == (4, 6)
    assert taken.retry_backoff == timedelta(seconds=1)  # the manifest's part of retry stays


async def test_the_manifest_passes_no_idle_timeout_unless_one_is_set(h: Harness) -> None:
    """``actor(idle_timeout=...)`` is honoured: no manifest default overrides it."""
    kube = Cluster(actor_spec())
    session_id, passes = await with_work(h, kube)

    await passes.reconcile()

    (pod,) = kube.pods.values()
    names = [env["name"] for env in pod["spec"]["containers"][0]["env"]]
    assert "HELMR_IDLE_TIMEOUT" not in names
    assert (await h.control.get_session(session_id)).limits is not None


async def test_a_session_whose_actor_never_appears_fails_after_the_grace(h: Harness) -> None:
    """A missing Actor fails its Sessions with a clear reason."""
    kube = Cluster(actor=None)
    session_id, passes = await with_work(h, kube)

    await passes.reconcile()
    assert (await h.control.get_session(session_id)).status == "open"  # it may come soon
    h.clock.advance(timedelta(seconds=30))
    await passes.reconcile()

    failed = await h.control.get_session(session_id)
    assert (failed.status, failed.failure_reason) == ("failed", "actor_not_found: reviewer")


async def test_an_actor_applied_just_after_the_session_is_waited_for(h: Harness) -> None:
    kube = Cluster(actor=None)
    session_id, passes = await with_work(h, kube)
    await passes.reconcile()

    kube.specs["Actor"] = actor_spec()
    h.clock.advance(timedelta(seconds=10))
    await passes.reconcile()

    started = await h.control.get_session(session_id)
    assert (started.status, started.process_live) == ("open", True)
    assert list(kube.pods) == ["s1-runner-1"]


async def test_a_refused_pod_create_is_a_failed_preparation_not_a_live_process(
    h: Harness,
) -> None:
    kube = Cluster(actor_spec(retry={"maxAttempts": 2, "backoffSeconds": 0}))
    kube.refuse_pods = True
    session_id, passes = await with_work(h, kube)

    await passes.reconcile()
    state = await h.control.get_session(session_id)
    assert (state.status, state.process_live) == ("open", False)
    await passes.reconcile()  # the second and last attempt

    failed = await h.control.get_session(session_id)
    assert failed.status == "failed"
    assert failed.failure_reason is not None
    assert failed.failure_reason.startswith("preparation_exhausted: runner pod not created: 422")


async def test_a_pod_not_running_by_the_deadline_fails_with_the_scheduler_message(
    h: Harness,
) -> None:
    kube = Cluster(actor_spec())
    session_id, passes = await with_work(h, kube)
    await passes.reconcile()
    kube.pods["s1-runner-1"]["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": UNSCHEDULABLE,
            }
        ],
    }

    h.clock.advance(timedelta(minutes=5))
    await passes.reconcile()

    assert kube.deleted_pods == ["s1-runner-1"]
    (failure,) = [e.data for e in await h.events(session_id) if e.kind.value.endswith("failed")]
    assert isinstance(failure, dict)
    assert failure["detail"] == f"not running after 300s: Unschedulable: {UNSCHEDULABLE}"
    assert (await h.control.get_session(session_id)).process_live is False


async def test_a_pod_that_started_unseen_is_prepared_at_the_deadline_not_failed(
    h: Harness,
) -> None:
    kube = Cluster(actor_spec())
    session_id, passes = await with_work(h, kube)
    await passes.reconcile()
    kube.pods["s1-runner-1"]["status"] = {
        "phase": "Running",
        "containerStatuses": [{"state": {"running": {}}}],
    }

    h.clock.advance(timedelta(minutes=5))
    await passes.reconcile()

    assert kube.deleted_pods == []
    assert (await h.control.get_session(session_id)).process_live
    assert await h.control.overdue_preparations(h.clock.advance(timedelta(hours=1))) == []


def test_a_pod_that_cannot_pull_its_image_failed_its_preparation_naming_the_image() -> None:
    never = waiting("ErrImageNeverPull", "Container image is not present with pull policy Never")

    assert failed_preparation(never) == (
        f"ErrImageNeverPull: image {IMAGE}: Container image is not present with pull policy Never"
    )
    assert failed_preparation(waiting("CreateContainerConfigError", 'secret "s" not found'))
    assert failed_preparation(waiting("ContainerCreating")) is None
    assert not container_started(never)


def test_a_pending_pod_says_why_and_a_started_one_is_prepared() -> None:
    assert pending_detail(None) == "its runner pod does not exist"
    assert pending_detail(waiting("ContainerCreating")) == f"ContainerCreating: image {IMAGE}"
    running = {"status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}}
    assert container_started(running)
    assert failed_preparation(running) is None
