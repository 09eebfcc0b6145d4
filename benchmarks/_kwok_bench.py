"""``bench_scale.py kwok``: many open Sessions on a real cluster, without containers.

The real control plane (``kopf run -m helmr.operator.kopf`` on this host: supervisor,
status mirror, TokenReview of runner tokens) starts N Sessions through its API; their
runner pods are pinned (``HELMR_RUNNER_NODE_SELECTOR``, ``HELMR_RUNNER_TOLERATIONS``)
to a fake node that kwok keeps Ready and whose pods it marks Running (``_kwok.py``).
Each Session still has its Workspace and Computer disk: a real PVC, provisioned by
the cluster's CSI driver (a directory on the real node; no pod mounts it). With
``--history``, the control plane is stopped once its runner pods run, that many
completed Turns are written into its store, and it is started again.

One process (``_fleet.py``) then plays every runner pod: for each pod a token from
TokenRequest for the ``helmr-runner`` service account, bound to that pod (name and
uid) with the runner audience, exactly what the kubelet would project into it, so the
control plane's TokenReview maps it to its Session and epoch; then the runner
protocol. Reported per store and N: control-plane RSS, no-op turns/s and enqueue ->
``turn.running`` under ``--clients`` enqueuers, apiserver writes per Turn (the
apiserver's ``apiserver_request_total``, ``_apiserver_writes.py``: in the run, and with
as long a window after it), and restart -> ready (SIGKILL, start again: until the API
admits a Turn, and until that Turn completed).

Everything is removed afterwards, on failure too: the namespace (its pods finalized
by kwok while it still runs), the fake node and kwok.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from _apiserver_writes import SETTLE_SECONDS, helmr_writes, write_rows
from _common import Table, bench_namespace, new_api_client, prepare
from _fleet import RECEIVE_WAIT, Fleet, Runner, enqueue, load
from _history import seed_history
from _kwok import SELECTOR, TOLERATIONS, fake_node
from _stores import each_row
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families
from tests.cluster import conftest
from tests.cluster.sessions import create_actor, service_account_token

from helmr.client import Client
from helmr.kube.labels import LABEL_COMPONENT, LABEL_EPOCH, LABEL_SESSION_ID, RUNNER
from helmr.operator.runners.pods import RUNNER_AUDIENCE, RUNNER_SERVICE_ACCOUNT
from helmr.protocol.api_routes import session_turns

DEFAULT_KUBECONFIG = "/var/lib/helmr-cluster/kubeconfig"
STARTS_AT_ONCE = 16
TOKEN_SECONDS = 3600
WARM_SECONDS = 900
"""How long every Session's first Turn may take once the fleet connected (each
runner's token reviewed once, after a restart with the history seeded)."""
DAY = 86_400


@dataclass(frozen=True, slots=True)
class RunnerPod:
    session_id: str
    epoch: int
    name: str
    uid: str


def running_pods(core: client.CoreV1Api, namespace: str, node: str) -> list[RunnerPod]:
    """The namespace's runner pods that kwok marked Running on the fake node."""
    # Any: the client's models make every field optional.
    listed: Any = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_COMPONENT}={RUNNER}")
    return [
        RunnerPod(
            pod.metadata.labels[LABEL_SESSION_ID],
            int(pod.metadata.labels[LABEL_EPOCH]),
            pod.metadata.name,
            pod.metadata.uid,
        )
        for pod in listed.items
        if pod.spec.node_name == node
        and pod.status.phase == "Running"
        and pod.metadata.deletion_timestamp is None
    ]


def pod_token(core: client.CoreV1Api, namespace: str, pod: RunnerPod) -> str:
    """The token the kubelet would project into ``pod``: the runner service account's,
    for the runner audience, bound to the pod."""
    return service_account_token(
        core,
        namespace,
        RUNNER_SERVICE_ACCOUNT,
        seconds=TOKEN_SECONDS,
        audiences=[RUNNER_AUDIENCE],
        bound_to=client.V1BoundObjectReference(
            api_version="v1", kind="Pod", name=pod.name, uid=pod.uid
        ),
    )


async def wait_for_pods(
    core: client.CoreV1Api, namespace: str, node: str, sessions: int
) -> dict[str, RunnerPod]:
    """Each Session's runner pod, once all ``sessions`` run on the fake node."""
    deadline = time.monotonic() + 120 + sessions * 0.5
    while True:
        pods = await asyncio.to_thread(running_pods, core, namespace, node)
        newest: dict[str, RunnerPod] = {}
        for pod in sorted(pods, key=lambda p: p.epoch):
            newest[pod.session_id] = pod
        if len(newest) >= sessions:
            return newest
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(newest)} of {sessions} runner pods Running")
        await asyncio.sleep(2)


async def start_sessions(op: conftest.Operator, actor: str, namespace: str, n: int) -> None:
    """``n`` Sessions of ``actor``, each with a Turn queued: a Session starts its
    runner pod for its first Turn."""
    at_once = asyncio.Semaphore(STARTS_AT_ONCE)
    async with Client(op.url, op.token) as helmr:

        async def start(i: int) -> None:
            async with at_once:
                session, _ = await helmr.actors.start(
                    actor, namespace=namespace, workspace=f"ws-{i}"
                )
                await session.enqueue({"first": True})

        await asyncio.gather(*(start(i) for i in range(n)))


def wait_gone(core: client.CoreV1Api, namespace: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(2)
    print(f"  namespace {namespace} still terminating after {timeout:.0f} s", flush=True)


@contextmanager
def scale_namespace(core: client.CoreV1Api, op: conftest.Operator) -> Iterator[str]:
    """A new namespace, deleted afterwards and waited for while the control plane
    runs (kopf's finalizers on its resources) and kwok too (its pods on the fake
    node); then the control plane is stopped."""
    name = ""
    op.start()
    try:
        with bench_namespace(core) as name:
            yield name
    finally:
        try:
            if name:
                if op.process is None or op.process.poll() is not None:
                    op.start()
                wait_gone(core, name)
        finally:
            op.stop()


def _rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now, or at its highest (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no {field}")


async def measure(
    table: Table,
    api: client.ApiClient,
    kubeconfig: str,
    node: str,
    label: str,
    store: str,
    sessions: int,
    args: argparse.Namespace,
) -> None:
    core = client.CoreV1Api(api)
    work = Path(tempfile.mkdtemp(prefix="helmr-kwok-"))
    location = {"HELMR_STORE_URL" if "://" in store else "HELMR_STORE_PATH": store}
    op = conftest.Operator.for_cluster(
        kubeconfig,
        work,
        # As the chart serves it: the runners' reconnection after a restart queues on
        # a socket of its own, not before the public API's clients.
        own_runner_port=True,
        **location,
        HELMR_API_TURN_RESOURCES=str(args.api_turn_resources).lower(),
        HELMR_RUNNER_NODE_SELECTOR=json.dumps(SELECTOR),
        HELMR_RUNNER_TOLERATIONS=json.dumps(TOLERATIONS),
        # Thousands of Sessions opened at once wait minutes for their disks (the
        # local cluster binds a few a second): past the default 5 minutes, a runner
        # pod still Pending fails its preparation and is made again, with a new disk.
        HELMR_PREPARATION_TIMEOUT_SECONDS="3600",
    )
    print(f"{label}: {sessions} sessions (operator log: {op.log})", flush=True)
    with scale_namespace(core, op) as namespace:
        # The Computer's saves are bench_computer.py's to measure: here a disk is saved
        # at most once a day (its first save taken as the history began), so a Turn
        # neither asks for a save nor waits for one to be cut.
        actor = create_actor(
            api, namespace, conftest.RUNNER_IMAGE, computer={"saveIntervalSeconds": DAY}
        )
        began = time.monotonic()
        await start_sessions(op, actor, namespace, sessions)
        pods = await wait_for_pods(core, namespace, node, sessions)
        opened = time.monotonic() - began
        print(f"  {sessions} runner pods Running in {opened:.0f} s", flush=True)
        if args.history:
            op.stop()
            epochs = {s: pod.epoch for s, pod in pods.items()}
            seeding = time.monotonic()
            await seed_history(store, epochs, args.history)
            seeded = time.monotonic() - seeding
            op.start()
            print(f"  {args.history} turns of history written in {seeded:.0f} s", flush=True)
        figures = await _load_and_restart(core, kubeconfig, op, namespace, pods, args)
        # Before the namespace's deletion, which takes minutes at thousands of Sessions.
        print(f"  {figures.line()}", flush=True)
    table.section(f"{label}, {sessions} open sessions, {args.history} turns of history")
    table.rows.append(("sessions started -> runner pods Running", f"{opened:.1f} s", "", "", ""))
    figures.report(table, args.clients)


@dataclass
class Figures:
    rss_mib: float
    turns: int
    seconds: float
    latencies: list[float]
    writes: Counter[str]
    """apiserver writes in the run, by verb and resource."""
    idle: Counter[str]
    """The same over as long a window right after, with no Turns."""
    restart: Restart

    def line(self) -> str:
        """The figures in one line (the table comes once the namespace is gone)."""
        latencies = sorted(self.latencies) or [float("nan")]
        p50, p99 = (latencies[int(q * (len(latencies) - 1))] * 1000 for q in (0.5, 0.99))
        writes = sum(self.writes.values()) / max(self.turns, 1)
        return (
            f"RSS {self.rss_mib:.0f} MiB; restart -> {self.restart};"
            f" {self.turns / self.seconds:.0f} Turns/s;"
            f" p50 / p99 {p50:.0f} / {p99:.0f} ms; {writes:.2f} writes per Turn in the run"
        )

    def report(self, table: Table, clients: int) -> None:
        table.rows.append(("control-plane RSS", f"{self.rss_mib:.0f} MiB", "", "", ""))
        self.restart.report(table)
        rate = self.turns / self.seconds
        table.rows.append((f"no-op turns/s ({clients} clients)", f"{rate:.0f}", "", "", ""))
        table.latency("enqueue -> turn.running", self.latencies)
        # The idle window holds other clients' writes (the apiserver's metrics do not
        # say whose), and also this run's own tail: Computer saves are taken after
        # their Turns, one Workspace at a time. Hence both bounds, not a difference.
        run, after = sum(self.writes.values()), sum(self.idle.values())
        turns = max(self.turns, 1)
        table.rows.append(
            ("apiserver writes per turn, in the run", f"{run / turns:.2f}", "", "", "")
        )
        table.rows.append(
            ("  with the window after it", f"{(run + after) / turns:.2f}", "", "", "")
        )
        write_rows(table, self.writes, self.idle)


@asynccontextmanager
async def connected_fleet(
    op: conftest.Operator, core: client.CoreV1Api, namespace: str, pods: dict[str, RunnerPod]
) -> AsyncIterator[tuple[aiohttp.ClientSession, Fleet]]:
    """A fleet playing every runner pod with a token bound to it, once it completed
    one Turn for every Session (each runner connected, its token reviewed); and
    the HTTP session it and the clients use."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=RECEIVE_WAIT + 30)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as http,
        Fleet(http, op.runner_url).running() as fleet,
    ):
        tokens = asyncio.Semaphore(STARTS_AT_ONCE)

        async def serve(session_id: str, pod: RunnerPod) -> None:
            async with tokens:
                token = await asyncio.to_thread(pod_token, core, namespace, pod)
            fleet.serve(session_id, Runner(pod.epoch, token))

        # A TokenRequest each: one after another, minutes at thousands of pods.
        await asyncio.gather(*(serve(s, pod) for s, pod in pods.items()))
        warm = [await enqueue(http, op, s) for s in fleet.sessions]
        await _completed(warm, fleet, WARM_SECONDS)
        yield http, fleet


async def _completed(turns: list[str], fleet: Fleet, seconds: float) -> None:
    """Waits for every Turn, saying every minute how many completed: a run that
    cannot finish shows how far it got."""
    waiting = {fleet.waiter(turn) for turn in turns}
    deadline = time.monotonic() + seconds
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{len(waiting)} of {len(turns)} Turns not completed in {seconds} s")
        _, waiting = await asyncio.wait(waiting, timeout=min(60, left))
        print(f"  {len(turns) - len(waiting)} of {len(turns)} Turns completed", flush=True)


async def _load_and_restart(
    core: client.CoreV1Api,
    kubeconfig: str,
    op: conftest.Operator,
    namespace: str,
    pods: dict[str, RunnerPod],
    args: argparse.Namespace,
) -> Figures:
    async with connected_fleet(op, core, namespace, pods) as (http, fleet):
        await asyncio.sleep(SETTLE_SECONDS)
        before = await asyncio.to_thread(helmr_writes, kubeconfig)
        async with _profiled(op, args.profile, args.seconds):
            turns, seconds, latencies = await load(
                http, op, fleet, args.clients, args.seconds, rate=args.rate
            )
        await asyncio.sleep(SETTLE_SECONDS)
        after = await asyncio.to_thread(helmr_writes, kubeconfig)
        await asyncio.sleep(seconds + SETTLE_SECONDS)  # the idle window
        idle = await asyncio.to_thread(helmr_writes, kubeconfig)
        assert op.process is not None
        rss = _rss_mib(op.process.pid)

        restarted = await _restarted(op, fleet)
        print(await _restart_profile(http, op), flush=True)
    return Figures(
        rss_mib=rss,
        turns=turns,
        seconds=seconds,
        latencies=latencies,
        writes=after - before,
        idle=idle - after,
        restart=restarted,
    )


PROBE = Path(__file__).with_name("_restart_probe.py")
PROFILE_RATE = 50


@asynccontextmanager
async def _profiled(
    op: conftest.Operator, into: Path | None, seconds: float
) -> AsyncIterator[None]:
    """With ``into``, py-spy samples every thread of the control plane, idle ones
    too (``--idle``: where the store's threads wait for PostgreSQL shows), for
    ``seconds`` from now, into ``into`` as collapsed stacks (one line per stack, its
    count last; ``--gil`` is left off, so waiting threads count)."""
    if into is None:
        yield
        return
    assert op.process is not None
    # Beside this Python (a virtualenv's bin), else on PATH.
    beside = Path(sys.executable).with_name("py-spy")
    spy = await asyncio.create_subprocess_exec(
        str(beside) if beside.exists() else "py-spy",
        *("record", "--format", "raw", "--idle", "--threads", "--nonblocking"),
        *("--rate", str(PROFILE_RATE), "--duration", str(int(seconds))),
        *("--pid", str(op.process.pid), "--output", str(into)),
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        await spy.wait()
        print(f"  profile of the load: {into} (py-spy exit {spy.returncode})", flush=True)


@dataclass(frozen=True, slots=True)
class Restart:
    """Seconds from the SIGKILL until the new process listened (its log's
    ``API listening``), until it first answered the probe (a 5xx counts), until its
    API admitted the probe's Turn, and until that Turn completed."""

    listening: float
    answered: float
    admitted: float
    done: float

    def __str__(self) -> str:
        return (
            f"listening {self.listening:.2f} s, answers {self.answered:.2f} s,"
            f" admits {self.admitted:.2f} s, done {self.done:.2f} s"
        )

    def report(self, table: Table) -> None:
        for what, seconds in (
            ("restart -> the API listens", self.listening),
            ("restart -> API admits a turn", self.admitted),
            ("restart -> that turn completed", self.done),
        ):
            table.rows.append((what, f"{seconds:.2f} s", "", "", ""))


async def _restarted(op: conftest.Operator, fleet: Fleet) -> Restart:
    """SIGKILL, and a new process at once. The Turn that shows the API admits again
    is asked for by a probe in a process of its own (``_restart_probe.py`` says why),
    from the moment of the kill, not after some readiness check of the benchmark's."""
    killed = time.time()
    op.kill()
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROBE),
        op.url + session_turns(fleet.sessions[0]),
        op.token,
        stdout=asyncio.subprocess.PIPE,
    )
    op.spawn()
    out, _ = await probe.communicate()
    if probe.returncode != 0:
        raise SystemExit(f"the restart probe failed ({probe.returncode}); see {op.log}")
    answer = json.loads(out)
    await asyncio.wait_for(fleet.waiter(answer["turn"]), 120)
    done = time.time()
    return Restart(
        listening=_logged_at(op.log, "API listening", after=killed) - killed,
        answered=answer["first_answer"] - killed,
        admitted=answer["admitted"] - killed,
        done=done - killed,
    )


def _logged_at(log: Path, message: str, *, after: float) -> float:
    """When the operator first logged ``message`` after ``after`` (text lines:
    ``%Y-%m-%d %H:%M:%S,mmm`` local time first)."""
    for line in log.read_text(errors="replace").splitlines():
        if message not in line:
            continue
        stamp, _, millis = line[:23].partition(",")
        at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
        if at > after:
            return at
    return float("nan")


RESTART_PROFILED = (
    "helmr_store_transaction_duration_seconds",
    "helmr_api_request_duration_seconds",
)


async def _restart_profile(http: aiohttp.ClientSession, op: conftest.Operator) -> str:
    """Where the restarted process spent its first seconds, from its own metrics:
    per store lane and kind, and per API route, how many and their mean seconds
    (queueing included), the busiest first."""
    async with http.get(f"{op.url}/metrics") as response:
        text = await response.text()
    counts: Counter[str] = Counter()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in RESTART_PROFILED:
            continue
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "le")
            key = f"{family.name.removeprefix('helmr_')}{{{labels}}}"
            if sample.name.endswith("_count"):
                counts[key] += int(sample.value)
            elif sample.name.endswith("_sum"):
                sums[key] = sums.get(key, 0.0) + sample.value
    lines = [f"  {n} x {sums[k] / n:.3f} s  {k}" for k, n in counts.most_common(12) if n]
    return "after the restart, until that Turn completed (its own metrics):\n" + "\n".join(lines)


@contextmanager
def kwok_cluster() -> Iterator[tuple[str, client.ApiClient, str]]:
    """The cluster at ``KUBECONFIG`` (or the local one), prepared, with a fake node
    for the run: its kubeconfig, an API client and the node's name."""
    kubeconfig = os.environ.get("KUBECONFIG", DEFAULT_KUBECONFIG)
    prepare(kubeconfig, build=False)
    api = new_api_client(kubeconfig)
    log = Path(tempfile.gettempdir()) / f"helmr-kwok-{uuid.uuid4().hex[:6]}.log"
    with fake_node(client.CoreV1Api(api), kubeconfig, log) as node:
        print(f"fake node {node} Ready (kwok log: {log})", flush=True)
        yield kubeconfig, api, node


async def kwok_bench(args: argparse.Namespace) -> None:
    table = Table()
    with kwok_cluster() as (kubeconfig, api, node):

        async def row(kind: str, store: str, sessions: int) -> None:
            await measure(table, api, kubeconfig, node, kind, store, sessions, args)

        await each_row(args, table, row)
