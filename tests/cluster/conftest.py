"""Fixtures for cluster tests: a real apiserver, never a mock.

``KUBECONFIG`` wins when set; otherwise the local cluster is brought up once
per test run by ``hack/cluster-up.sh`` (idempotent, fast when already up).
Every test gets a fresh namespace, deleted afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from helmr.client import Client, SessionRef

from .pods import PodHistory
from .sessions import create_actor, create_misbehaving_actor, start_session

REPO = Path(__file__).resolve().parents[2]
# Namespaces of this test run share a prefix, so the operator a run starts
# watches only its own namespaces, even beside another run on one cluster.
RUN_PREFIX = f"t{uuid.uuid4().hex[:6]}-"
# Namespaces served by a control plane a test starts for itself (a helm release,
# a metered operator): outside the shared operator's pattern, so two control
# planes never reconcile one Session.
OWN_PREFIX = f"o{RUN_PREFIX}"
RUNNER_IMAGE = "helmr.local/runner:dev"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


_LOG_START = pytest.StashKey[int]()
LOG_TAIL_LINES = 500


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    if isinstance(op := getattr(item, "funcargs", {}).get("operator"), Operator):
        item.stash[_LOG_START] = op.log.stat().st_size if op.log.exists() else 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries what the shared operator logged during it:
    its log is a file in a temporary directory, gone with the machine a CI ran on,
    and an intermittent failure must be diagnosable from the one run that saw it."""
    report: pytest.TestReport = yield
    funcargs = getattr(item, "funcargs", {})
    op = funcargs.get("operator")
    namespace, kubeconfig = funcargs.get("namespace"), os.environ.get("KUBECONFIG")
    if report.when == "call" and report.failed and isinstance(namespace, str) and kubeconfig:
        # What the cluster shows of the test's namespace before its teardown deletes
        # it: a pod left Pending, a claim unbound, a snapshot failed, and their events.
        report.sections.append((f"namespace {namespace}", _namespace_state(kubeconfig, namespace)))
    if report.when == "call" and report.failed and isinstance(op, Operator):
        with op.log.open("rb") as log:
            log.seek(item.stash.get(_LOG_START, 0))
            lines = log.read().decode(errors="replace").splitlines()
        report.sections.append(
            (
                f"operator log, last {LOG_TAIL_LINES} of its {len(lines)} lines during the test",
                "\n".join(lines[-LOG_TAIL_LINES:]),
            )
        )
    return report


def _namespace_state(kubeconfig: str, namespace: str) -> str:
    shown = []
    for args in (
        ("get", "pods,pvc,volumesnapshots", "-o", "wide"),
        ("get", "events", "--sort-by=.lastTimestamp"),
    ):
        done = kubectl(kubeconfig, "-n", namespace, *args)
        shown.append(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}")
    return "\n".join(shown)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get("KUBECONFIG")
    if not path:
        out = subprocess.run(
            ["bash", str(REPO / "hack" / "cluster-up.sh")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        path = out.strip().splitlines()[-1]
        os.environ["KUBECONFIG"] = path
    return path


@pytest.fixture(scope="session")
def api_client(kubeconfig: str) -> client.ApiClient:
    api: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    return api


@pytest.fixture(scope="session")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def kubectl(
    kubeconfig: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs the cluster's own kubectl; returns the finished process (check it yourself)."""
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


def kubectl_apply(kubeconfig: str, namespace: str, manifests: str) -> None:
    """``kubectl apply -f -`` of ``manifests`` (YAML documents) in ``namespace``, as a
    user would; the test fails on a refusal."""
    applied = kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", input=manifests)
    assert applied.returncode == 0, applied.stderr


@pytest.fixture(scope="session")
def crds(kubeconfig: str) -> Iterator[None]:
    """Installs the committed CRDs and the chart's admission policies, and waits
    until the CRDs are served. Policies it created are deleted afterwards: left
    behind without helm's ownership, they would make a later `make demo`'s helm
    install refuse to adopt them."""
    applied = kubectl(kubeconfig, "apply", "--server-side", "-f", str(REPO / "crds"))
    assert applied.returncode == 0, applied.stderr
    waited = kubectl(
        kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(REPO / "crds")
    )
    assert waited.returncode == 0, waited.stderr
    policies = REPO / "charts" / "helmr" / "policies"
    existed = kubectl(kubeconfig, "get", "-f", str(policies)).returncode == 0
    # A demo release's helm owns existing ones: the tests' (this checkout's) win.
    applied = kubectl(
        kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(policies)
    )
    assert applied.returncode == 0, applied.stderr
    yield
    if not existed:
        kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", str(policies))


def create_namespace(core: client.CoreV1Api, prefix: str = RUN_PREFIX) -> str:
    """A new namespace of this test run (the shared operator watches it, unless
    another ``prefix`` keeps it to an operator of its own)."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=name,
                labels={"pod-security.kubernetes.io/enforce": "restricted"},
            )
        )
    )
    return name


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = create_namespace(core)
    yield name
    delete_namespace(core, name)


@pytest.fixture(scope="session")
def runner_image(kubeconfig: str) -> str:
    """The runner image of the code under test, in the node's containerd."""
    subprocess.run(["bash", str(REPO / "hack" / "build-images.sh"), "--import"], check=True)
    return RUNNER_IMAGE


def _node_ip() -> str:
    # The address pods reach this host at: the source of the default route.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.254", 9))
        return str(s.getsockname()[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@dataclass
class Operator:
    """The control plane under test: ``kopf run -m helmr.operator.kopf``, a real process."""

    url: str
    token: str
    env: dict[str, str]
    log: Path
    runner_url: str
    """Where runner pods reach its runner API."""
    process: subprocess.Popen[bytes] | None = None
    modules: tuple[str, ...] = ("helmr.operator.kopf",)
    """The modules ``kopf run`` loads (a benchmark adds a probe of its own)."""

    @classmethod
    def for_cluster(
        cls, kubeconfig: str, data: Path, *, own_runner_port: bool = True, **settings: str
    ) -> Operator:
        """An operator (not started) against ``kubeconfig`` that keeps its store in
        ``data``, on a free port, with a static token; ``settings`` add env vars.
        ``own_runner_port``: the runner API on a port of its own, as the chart serves
        it (``helmr.server.runner_server``); False: beside the public API (aiohttp's,
        as ``helmr dev`` serves it)."""
        port = _free_port()
        runner_port = _free_port() if own_runner_port else port
        runner_url = f"http://{_node_ip()}:{runner_port}"
        token = uuid.uuid4().hex
        env = dict(os.environ) | {
            "KUBECONFIG": kubeconfig,
            "HELMR_STORE_PATH": str(data / "helmr.db"),
            "HELMR_API_PORT": str(port),
            "HELMR_RUNNER_PORT": str(runner_port),
            "HELMR_RUNNER_URL": runner_url,
            "HELMR_AUTH": f"static:{token}",
        }
        return cls(
            url=f"http://127.0.0.1:{port}",
            token=token,
            env=env | settings,
            log=data / "operator.log",
            runner_url=runner_url,
        )

    def start(self, namespaces: str = f"{RUN_PREFIX}*") -> None:
        """Starts it watching ``namespaces`` (kopf's ``--namespace`` pattern), and
        returns once it answers ``/healthz``."""
        self.spawn(namespaces)
        assert self.process is not None
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=1)
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"operator did not start; see {self.log}") from None
                time.sleep(0.2)

    def spawn(self, namespaces: str = f"{RUN_PREFIX}*") -> None:
        """Starts its process, without waiting for it to serve."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kopf",
                    "run",
                    *(arg for module in self.modules for arg in ("-m", module)),
                    "--standalone",
                    "--namespace",
                    namespaces,
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup runs, as when a node dies under the control plane."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM, as a pod's stop sends it: the process must end well inside the
        chart's grace period (``terminationGracePeriodSeconds``, 30 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
                message = f"the operator ignored SIGTERM for 15 s; see {self.log}"
                raise AssertionError(message) from None


@pytest.fixture(scope="session")
def operator(
    kubeconfig: str, crds: None, runner_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator.for_cluster(
        kubeconfig,
        tmp_path_factory.mktemp("operator"),
        HELMR_RECONCILE_INTERVAL="0.5",
        HELMR_STOP_GRACE_SECONDS="3",
    )
    op.start()
    yield op
    op.stop()


@pytest.fixture
async def helmr(operator: Operator) -> AsyncIterator[Client]:
    """The Python client, talking to the operator under test."""
    async with Client(operator.url, operator.token) as c:
        yield c


@pytest.fixture
async def session(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> SessionRef:
    """A session of the default echo Actor in the test's namespace."""
    create_actor(api_client, namespace, runner_image)
    return await start_session(helmr, namespace)


@pytest.fixture
async def misbehaving_session(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> SessionRef:
    """A session of the misbehaving echo (``sessions.MISBEHAVING``) in the test's namespace."""
    actor = create_misbehaving_actor(api_client, namespace, runner_image)
    return await start_session(helmr, namespace, actor)


@pytest.fixture
def pod_history(kubeconfig: str, namespace: str) -> Iterator[PodHistory]:
    history = PodHistory(namespace, kubeconfig)
    history.start()
    yield history
    history._stop.set()
