"""What the cluster benchmarks share: the table of figures, watches that timestamp
objects as this host sees them, bare pods of the runner image, and the control
plane, namespace and CRDs a run measures against.

Imported by the benchmark scripts (``benchmarks/`` is on ``sys.path`` when one
runs); each script puts the repository root on ``sys.path`` first.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from tests.cluster import conftest
from tests.cluster.pods import restricted_container

from helmr.client import Event
from helmr.protocol.contract import COMPUTER_DIR

REPO = Path(__file__).resolve().parents[1]
RUNNER_LABEL = "helmr.dev/component=runner"
BARE_LABEL = "bench=bare-pod"
RUNNER_GROUP = 65532
"""The runner pod's ``fsGroup``: a mounted volume is made writable for it."""

# --- statistics and the table -----------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between closest ranks."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []

    def section(self, title: str) -> None:
        self.rows.append((title, "", "", "", ""))

    def latency(self, name: str, seconds: list[float]) -> tuple[float, float]:
        ms = [s * 1000 for s in seconds]
        p50, p99 = percentile(ms, 50), percentile(ms, 99)
        mean = statistics.fmean(ms)
        self.rows.append((f"  {name}", str(len(ms)), f"{p50:.1f}", f"{p99:.1f}", f"{mean:.1f}"))
        return p50, p99

    def ratio(self, name: str, top: tuple[float, float], bottom: tuple[float, float]) -> None:
        self.rows.append(
            (f"  {name}", "", f"{top[0] / bottom[0]:.2f}x", f"{top[1] / bottom[1]:.2f}x", "")
        )

    def print(self) -> None:
        header = ("measurement", "n", "p50 ms", "p99 ms", "mean ms")
        width = max(len(r[0]) for r in [*self.rows, header])
        line = f"{{:<{width}}}  {{:>4}}  {{:>9}}  {{:>9}}  {{:>9}}"
        print(line.format(*header))
        print("-" * (width + 40))
        for row in self.rows:
            print(line.format(*row))


# --- watches --------------------------------------------------------------------------------


def new_api_client(kubeconfig: str) -> client.ApiClient:
    """An API client of its own (one per watching thread)."""
    api: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    return api


def resource_version(obj: Any) -> str:
    """The resource version of an object or a list, typed or a custom object's dict."""
    if isinstance(obj, dict):
        return str(obj["metadata"]["resourceVersion"])
    return str(obj.metadata.resource_version)


def object_name(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj["metadata"]["name"])
    return str(obj.metadata.name)


class Follower(threading.Thread):
    """Watches the objects ``list_objects(*args)`` lists; ``note`` records what each
    event shows, timestamped when this host saw it, and ``wait`` blocks on a record."""

    def __init__(self, list_objects: Callable[..., Any], *args: str) -> None:
        super().__init__(daemon=True)
        self.list_objects = list_objects
        self.args = args
        self.done = threading.Event()
        self.changed = threading.Condition()
        self._present: dict[str, Any] = {}
        """The last state of each object seen and not deleted, by name."""

    def run(self) -> None:
        version = resource_version(self.list_objects(*self.args))
        while not self.done.is_set():
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                self.list_objects,
                *self.args,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=30,
            )
            try:
                for event in stream:
                    seen = time.time()
                    version = resource_version(event["object"])
                    if event["type"] != "BOOKMARK":
                        self._noted(event["type"], event["object"], seen)
            except client.ApiException as e:
                if e.status != 410:
                    raise
                version = self._relist()

    def _noted(self, change: str, obj: Any, at: float) -> None:
        with self.changed:
            self.note(change, obj, at)
            self._present[object_name(obj)] = obj
            if change == "DELETED":
                del self._present[object_name(obj)]
            self.changed.notify_all()

    def _relist(self) -> str:
        """After ``410 Expired`` (other clients' churn moved the apiserver's window past
        this watch): lists again and notes every object, and every deletion, as seen
        now, so a change made in the gap is timed late rather than never seen."""
        listed = self.list_objects(*self.args)
        seen = time.time()
        items = listed["items"] if isinstance(listed, dict) else listed.items
        gone = set(self._present) - {object_name(obj) for obj in items}
        for name in gone:
            self._noted("DELETED", self._present[name], seen)
        for obj in items:
            self._noted("LISTED", obj, seen)
        return resource_version(listed)

    def note(self, change: str, obj: Any, at: float) -> None:
        """Records what one watch event (``ADDED``, ``MODIFIED``, ``DELETED``) or a
        re-list (``LISTED``) shows."""
        raise NotImplementedError

    def wait(self, record: dict[str, float], name: str, timeout: float = 120) -> float:
        """When ``name`` entered ``record`` (one of this follower's dicts)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while name not in record:
                if not self.is_alive():  # its watch failed: say so now, not at the deadline
                    raise RuntimeError(f"the watch waiting for {name} has ended")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{name} not seen within {timeout}s")
                self.changed.wait(min(left, 1.0))
            return record[name]


class PodTimes(Follower):
    """When each pod of a namespace was first seen, scheduled, ``Running`` and gone,
    its node and the claims it mounts."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        super().__init__(core.list_namespaced_pod, namespace)
        self.added: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self.claims: dict[str, list[str]] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        name = obj.metadata.name
        self.added.setdefault(name, at)
        self.claims.setdefault(
            name,
            [
                v.persistent_volume_claim.claim_name
                for v in obj.spec.volumes or ()
                if v.persistent_volume_claim is not None
            ],
        )
        if obj.spec.node_name:
            self.nodes[name] = obj.spec.node_name
            self.scheduled.setdefault(name, at)
        if obj.status.phase == "Running":
            self.running.setdefault(name, at)
        if change == "DELETED":
            self.gone.setdefault(name, at)

    def wait_running(self, name: str, timeout: float = 120) -> float:
        return self.wait(self.running, name, timeout)


class ClaimTimes(Follower):
    """When each claim of a namespace was first seen ``Bound`` (to its provisioned volume)."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        super().__init__(core.list_namespaced_persistent_volume_claim, namespace)
        self.bound: dict[str, float] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        if obj.status.phase == "Bound":
            self.bound.setdefault(obj.metadata.name, at)

    def wait_bound(self, name: str, timeout: float = 120) -> float:
        return self.wait(self.bound, name, timeout)


def log_line_time(core: client.CoreV1Api, namespace: str, name: str) -> float:
    """When the container runtime stamped the pod's first log line."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            text = core.read_namespaced_pod_log(name, namespace, timestamps=True)
        except client.ApiException:
            text = ""
        if text.strip():
            stamp = text.split(" ", 1)[0]
            return parse_rfc3339(stamp)
        time.sleep(0.1)
    raise TimeoutError(f"pod {name} logged nothing")


def parse_rfc3339(stamp: str) -> float:
    # 2024-01-01T00:00:00.123456789Z: trim the nanoseconds Python cannot parse.
    head, _, frac = stamp.rstrip("Z").partition(".")
    micro = (frac + "000000")[:6]
    return datetime.fromisoformat(f"{head}.{micro}+00:00").timestamp()


async def no_pods_left(core: client.CoreV1Api, namespace: str, selector: str) -> None:
    """Waits until no pod of ``selector`` is left, so samples never overlap."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        listed = await asyncio.to_thread(
            core.list_namespaced_pod, namespace, label_selector=selector
        )
        if not listed.items:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"pods {selector} still there")


# --- bare pods and the timeline -----------------------------------------------------------

BARE = "print('up', flush=True); import time; time.sleep(3600)"
"""A bare pod: Python prints a line at once."""


RUNNER_CPU = "10m"
"""The CPU the benchmarks' runner pods ask for (their Actors' ``resources``)."""


def bare_pod(
    name: str,
    image: str,
    node: str,
    code: str,
    computer: client.V1Volume | None = None,
    cpu: str = RUNNER_CPU,
) -> client.V1Pod:
    """A pod of ``image`` running ``code`` on ``node``, restricted as a runner is, asking
    for ``cpu``; with ``computer``, that volume mounted where a runner's Computer disk is."""
    container = restricted_container(name, ["python3", "-c", code], image=image)
    # As the runner pods get them (the Actor's resources, a read-only root).
    container.resources = client.V1ResourceRequirements(
        requests={"cpu": cpu}, limits={"memory": "128Mi"}
    )
    assert container.security_context is not None
    container.security_context.read_only_root_filesystem = True
    spec = client.V1PodSpec(
        restart_policy="Never",
        automount_service_account_token=False,
        termination_grace_period_seconds=0,
        node_selector={"kubernetes.io/hostname": node},
        containers=[container],
    )
    if computer is not None:
        container.volume_mounts = [
            client.V1VolumeMount(name=computer.name, mount_path=COMPUTER_DIR)
        ]
        spec.volumes = [computer]
        spec.security_context = client.V1PodSecurityContext(fs_group=RUNNER_GROUP)
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"bench": "bare-pod"}), spec=spec
    )


def fresh_claim(name: str, size: str) -> client.V1PersistentVolumeClaim:
    """A claim as the operator makes a fresh disk: the Actor's size, the default class."""
    return client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name, labels={"bench": "bare-claim"}),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=["ReadWriteOnce"],
            resources=client.V1VolumeResourceRequirements(requests={"storage": size}),
        ),
    )


def first(events: list[Event], kind: str, turn_id: str) -> float:
    """When the first event of ``kind`` for ``turn_id`` was recorded."""
    for event in events:
        if event.kind == kind and event.turn_id == turn_id:
            return event.created_at.timestamp()
    raise LookupError(f"no {kind} for {turn_id}")


# --- setup ------------------------------------------------------------------------------------


@contextmanager
def control_plane(
    kubeconfig: str, namespaces: str = f"{conftest.RUN_PREFIX}*", **settings: str
) -> Iterator[conftest.Operator]:
    """A control plane serving ``namespaces`` (kopf's pattern), ``settings`` its env."""
    data = Path(tempfile.mkdtemp(prefix="helmr-bench-"))
    op = conftest.Operator.for_cluster(kubeconfig, data)
    op.env |= settings
    op.start(namespaces)
    try:
        yield op
    finally:
        op.stop()
        print(f"operator log: {op.log}")


@contextmanager
def bench_namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"{conftest.RUN_PREFIX}bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=name, labels={"pod-security.kubernetes.io/enforce": "restricted"}
            )
        )
    )
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


def prepare(kubeconfig: str, build: bool) -> None:
    """Applies the CRDs (and waits until they are served); with ``build``, builds
    and imports the runner image of this checkout."""
    for args in (
        ["apply", "--server-side", "-f", str(REPO / "crds")],
        ["wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "crds")],
    ):
        done = conftest.kubectl(kubeconfig, *args)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
    if build:
        subprocess.run(["bash", str(REPO / "hack" / "build-images.sh"), "--import"], check=True)
