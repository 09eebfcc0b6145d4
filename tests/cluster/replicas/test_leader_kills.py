"""Two control-plane replicas on PostgreSQL, installed with helm (issue 11, item 4).

The chart runs 2 replicas on a PostgreSQL server of this host (Debian's, started
by tests.postgres, served on the cluster's node IP to the pods). The leader (the
Lease's holder) is killed while a Turn runs, five times, alternately: its
process SIGKILLed on this node (a crash: nothing releases the Lease, which must
expire; the container restarts as a candidate) and its pod deleted without grace
(the process stops on SIGTERM and releases the Lease). Each time: no Turn is
lost (every one completes, with its result), none runs twice (one
``turn.running`` each), never more than one runner pod for the session at any
moment (watched), and the API, asked every 200 ms through the apiserver's
Service proxy, answers throughout from the other replica: Helmr never answers
5xx without Retry-After. The proxy itself may fail a request
routed to the killed pod before its endpoint is gone (it tells no Retry-After
either); those are counted apart and must stay brief.
"""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from helmr.client import Client
from helmr.errors import Unavailable
from helmr.protocol import api_routes
from helmr.protocol.api_routes import PROXIED_AUTHORIZATION
from tests import postgres

from .conftest import OWN_PREFIX, _node_ip, create_namespace, delete_namespace
from .pods import PodHistory
from .sessions import all_events, create_misbehaving_actor, eventually, operator_watches
from .test_chart_release import helm, install_chart

pytestmark = pytest.mark.helm

KILLS = 5
LEASE_SECONDS = 6
TURN_SECONDS = 6.0
PROBE_INTERVAL = 0.2
# Longest run of failed proxy requests allowed (the killed pod's endpoint being removed).
PROXY_GAP = 3.0


@dataclass
class Release:
    name: str
    namespace: str
    service: str
    token: str
    base_url: str
    ssl: ssl.SSLContext

    @property
    def headers(self) -> dict[str, str]:
        return {PROXIED_AUTHORIZATION: f"Bearer {self.token}"}


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A store database on a server the cluster's pods reach at the node IP."""
    binaries = postgres.find_binaries()
    assert binaries is not None, "PostgreSQL is not installed (hack/install-deps.sh)"
    node_ip = _node_ip()
    server = postgres.start(binaries, also_listen=node_ip)
    try:
        server.prepare_template()
        with server.database() as url:
            yield url.replace("@127.0.0.1:", f"@{node_ip}:")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def release(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    crds: None,
    runner_image: str,
    database: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    namespace = create_namespace(core, prefix=OWN_PREFIX)
    name = f"r{uuid.uuid4().hex[:6]}"
    token = uuid.uuid4().hex
    core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="store"), string_data={"url": database}),
    )
    values = {
        "replicas": "2",
        "store.postgres.existingSecret": "store",
        "leaderElection.leaseSeconds": str(LEASE_SECONDS),
        "tests.enabled": "false",
        "operator.extraEnv[0].name": "HELMR_AUTH",
        "operator.extraEnv[0].value": f"static:{token}",
    }
    install_chart(kubeconfig, name, namespace, tmp_path_factory.mktemp("helm"), values)
    [service] = core.list_namespaced_service(
        namespace, label_selector=f"app.kubernetes.io/instance={name}"
    ).items
    configuration = api_client.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.load_cert_chain(configuration.cert_file, configuration.key_file)
    base_url = (
        f"{configuration.host}/api/v1/namespaces/{namespace}"
        f"/services/{service.metadata.name}:8080/proxy"
    )
    yield Release(name, namespace, str(service.metadata.name), token, base_url, context)
    helm(kubeconfig, "uninstall", name, "-n", namespace, "--wait")
    delete_namespace(core, namespace)


@pytest.fixture
async def helmr(release: Release) -> AsyncIterator[Client]:
    async with Client(release.base_url, headers=release.headers, ssl=release.ssl) as c:
        yield c


@dataclass
class Probe:
    """Asks the API for the session every PROBE_INTERVAL and sorts the answers."""

    release: Release
    path: str
    ok: int = 0
    helmr_5xx: list[str] = field(default_factory=list)
    proxy_failures: list[float] = field(default_factory=list)
    longest_gap: float = 0.0

    async def run(self) -> None:
        failing_since: float | None = None
        async with aiohttp.ClientSession(headers=self.release.headers) as http:
            while True:
                answered = await self._ask(http)
                now = time.monotonic()
                if answered:
                    failing_since = None
                else:
                    failing_since = failing_since or now
                    self.longest_gap = max(self.longest_gap, now - failing_since)
                await asyncio.sleep(PROBE_INTERVAL)

    async def _ask(self, http: aiohttp.ClientSession) -> bool:
        try:
            async with http.get(
                self.release.base_url + self.path,
                ssl=self.release.ssl,
                timeout=aiohttp.ClientTimeout(total=5),
            ) as response:
                body = await response.text()
                if response.status == 200:
                    self.ok += 1
                    return True
                if _from_the_apiserver(body):
                    self.proxy_failures.append(time.monotonic())
                    return False
                if response.status >= 500 and "Retry-After" not in response.headers:
                    self.helmr_5xx.append(f"{response.status}: {body[:200]}")
                return response.status < 500
        except (aiohttp.ClientError, TimeoutError):
            self.proxy_failures.append(time.monotonic())
            return False


def _from_the_apiserver(body: str) -> bool:
    # The apiserver's own errors are Status objects; Helmr's are its ErrorBody.
    return '"kind":"Status"' in body.replace(" ", "")


def lease_holder(api_client: client.ApiClient, release: Release) -> str:
    """The leader's identity: its pod's name, ``_``, a suffix of its process."""
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        f"{release.service}-leader", release.namespace
    )
    holder: str = lease.spec.holder_identity or ""
    return holder


def crash(core: client.CoreV1Api, namespace: str, pod_name: str) -> None:
    """SIGKILLs the pod's control-plane process: the node is this machine."""
    uid = core.read_namespaced_pod(pod_name, namespace).metadata.uid
    killed = 0
    for entry in Path("/proc").iterdir():
        try:
            cgroups = (entry / "cgroup").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # not a process, or gone
        if f"pod{uid}/" in cgroups and b"kopf" in command:
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    assert killed == 1, f"{killed} control-plane processes found in pod {pod_name}"


def ready_control_planes(core: client.CoreV1Api, release: Release) -> list[str]:
    pods = core.list_namespaced_pod(
        release.namespace, label_selector=f"app.kubernetes.io/instance={release.name}"
    ).items
    return [
        str(p.metadata.name)
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


async def test_killing_the_leader_mid_turn_loses_no_turn_and_the_api_answers(
    kubeconfig: str,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    release: Release,
    runner_image: str,
    helmr: Client,
) -> None:
    actor = create_misbehaving_actor(api_client, release.namespace, runner_image)
    await operator_watches(api_client, release.namespace, actor)
    history = PodHistory(release.namespace, kubeconfig)
    history.start()
    session, _ = await helmr.actors.start(actor, namespace=release.namespace, workspace="ws")
    probe = Probe(release, api_routes.session(session.id))
    probing = asyncio.create_task(probe.run())
    turns = []
    leaders = []
    handovers = []
    try:
        for kill in range(KILLS):
            await eventually(
                lambda: len(ready_control_planes(core, release)) == 2,
                timeout=180,
                what="both replicas ready",
            )
            turn = await helmr_retrying(
                lambda k=kill: session.enqueue({"sleep": TURN_SECONDS, "n": k})
            )
            turns.append(turn)
            await eventually_async(
                lambda t=turn: turn_status(t, "running"), timeout=120, what=f"turn {kill} running"
            )
            leader = lease_holder(api_client, release)
            leaders.append(leader)
            pod = leader.rpartition("_")[0]
            if kill % 2 == 0:
                crash(core, release.namespace, pod)
            else:
                core.delete_namespaced_pod(pod, release.namespace, grace_period_seconds=0)
            killed = time.monotonic()
            await eventually(
                lambda gone=leader: lease_holder(api_client, release) not in ("", gone),
                timeout=LEASE_SECONDS * 3,
                what=f"a new leader after killing {leader}",
            )
            handovers.append(time.monotonic() - killed)
        results = [await helmr_retrying(lambda t=t: t.wait(timeout=120)) for t in turns]
    finally:
        probing.cancel()
        history.stop()
    # What it measured, for the record (pytest -s shows it).
    print(
        f"handovers (kill -> new Lease holder seen, s): {[round(h, 1) for h in handovers]}; "
        f"probes answered {probe.ok}, Helmr 5xx {len(probe.helmr_5xx)}, proxy failures "
        f"{len(probe.proxy_failures)}, longest unanswered run {probe.longest_gap:.1f} s"
    )
    assert len(set(leaders)) == KILLS, leaders
    # Within the Lease duration of the last renewal, plus a retry and scheduling slack.
    assert max(handovers) < LEASE_SECONDS + 3, handovers
    # After a crash the Lease had to expire: nobody took over early.
    assert min(handovers[0::2]) > LEASE_SECONDS - 1.5, handovers
    assert [r.status for r in results] == ["completed"] * KILLS, results
    assert [r.result for r in results] == [
        {"echo": {"sleep": TURN_SECONDS, "n": n}} for n in range(KILLS)
    ]
    events = await all_events(session)
    running = [str(e.turn_id) for e in events if e.kind == "turn.running"]
    assert sorted(running) == sorted(t.id for t in turns), running  # each ran once
    assert max(history.counts) == 1, history.counts  # one runner pod, never two
    assert not probe.helmr_5xx, probe.helmr_5xx
    assert probe.longest_gap < PROXY_GAP, (probe.longest_gap, probe.proxy_failures)
    assert probe.ok > 0


async def turn_status(turn: Any, status: str) -> bool:
    view = await helmr_retrying(turn.retrieve)
    return bool(view.status == status)


async def eventually_async(check: Any, timeout: float, what: str) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def helmr_retrying(call: Any, attempts: int = 20) -> Any:
    """The workload's calls: a request the proxy routed to the killed pod is repeated."""
    for attempt in range(attempts):
        try:
            return await call()
        except (aiohttp.ClientError, OSError, TimeoutError, Unavailable):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")
