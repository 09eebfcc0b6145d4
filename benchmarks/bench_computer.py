"""Computer disk costs against a real cluster with real storage: saves, restores
after an execution loss, and what a fresh PVC adds to a cold start.

Starts a real control plane (``kopf run -m helmr.operator.kopf``, as the cluster tests
and bench_session_loop do) with its default settings, and runs sessions of the
``files`` test actor (tests/actors/files.py), each on a fresh Workspace, so each
starts on a new, empty PVC. Measured, in one run:

save and restore, for each size (default 100 MB and 1 GB: one turn writes that
many random, incompressible bytes, ``{"fill": {"data.bin": size}}``, fsynced
before it completes; with ``--unsynced`` also without the fsync, so the save's
cut flushes what the turn left dirty):
  - save: the writing turn's ``turn.completed`` → the save taken (the operator's
    store, ``taken_at``) → the operator's VolumeSnapshot (``<workspace>-save-1``)
    created → its VolumeSnapshotContent created by the snapshot controller →
    marked being created by the CSI snapshotter (it calls the driver) → the
    driver's cut (the content's ``creationTime``, the driver's own clock) → that
    ``creationTime`` seen on the content → the cut recorded (the operator's
    store, ``cut_at``) → the next turn, queued behind the writing one,
    ``turn.running`` (it waits for that cut: turn-aligned saves); beside them the
    snapshot bound to its content and its own ``creationTime`` →
    ``readyToUse`` → the Workspace's ``status.computerVersion`` naming it (the
    committed Computer version; the operator polls pending saves once a
    supervisor pass, 1 s by default);
  - every save settled (none pending: a loss leaves no recovery gap, which would
    hold the Session for acknowledgement and its queued turn with it);
  - fork: a fork of the session at the writing turn (its save restored on a new
    Workspace), from the fork call to the fork's first ``turn.running``, beside
    the Helmr cold start (a fresh empty PVC);
  - restore: with a later turn running (a sleep) and one more queued, the runner
    pod is deleted (an execution loss). From the delete call → the old pod gone
    from the apiserver → the restored claim (``<workspace>-disk-2``, its
    dataSource the save) created → Bound (the PVC-from-snapshot bind time) → the
    new runner pod Running → the queued turn's ``turn.running``. The queued turn
    reads the file's size back, so a restore that lost bytes fails the run.

cold start, one pod at a time on the runner's node, the kinds alternating so
they share the node's load:
  - a Helmr session started on a fresh Workspace and a turn enqueued → its PVC
    Bound → its runner pod Running → the first ``turn.running``;
  - bare pods of the runner image printing a line at once: with no volume (as
    bench_session_loop's bare pod), with an emptyDir at /computer, and with a
    fresh PVC of the Actor's size and the default StorageClass (claim and pod
    created back to back, ``fsGroup`` as the runner has it).

Why no "Helmr session without a volume": every runner now mounts its
Workspace's PVC, so that path no longer exists. The honest comparison is in two
parts, measured side by side: a Helmr session with a fresh PVC against the bare
pod without a volume (the baseline bench_session_loop's cold ratio uses, so the
two runs' ratios compare), and what a fresh PVC costs a pod on its own (bare pod
with the PVC against without). Execution loss → the next turn running is given
as a ratio to the Helmr cold start of this run.

Every timestamp is this host's wall clock (the control plane and the node run
here). Figures are printed, never asserted; only the restored bytes are checked.

    KUBECONFIG=/var/lib/helmr-cluster/kubeconfig \\
        .venv/bin/python benchmarks/bench_computer.py [--sizes 100M,1G] [--samples 3] [--cold 5] \\
        [--unsynced]
    ... benchmarks/bench_computer.py --quick   # 1 MB and 10 MB, one sample, 2 cold starts
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (
    BARE,
    BARE_LABEL,
    RUNNER_LABEL,
    Follower,
    PodTimes,
    Table,
    bare_pod,
    bench_namespace,
    control_plane,
    first,
    fresh_claim,
    log_line_time,
    new_api_client,
    no_pods_left,
    prepare,
)
from kubernetes import client
from tests.cluster import conftest
from tests.cluster.sessions import all_events, create_actor, eventually

from helmr.client import Client, SessionRef, Turn, TurnRef
from helmr.kube.snapshots import SNAPSHOT_CONTENTS, SNAPSHOT_GROUP, SNAPSHOT_VERSION, SNAPSHOTS
from helmr.operator.runners.pods import pod_name
from helmr.resources import GROUP, VERSION, WORKSPACES
from helmr.resources.workspace import claim_name, save_name

FILES = "files"
"""The Actor of tests/actors/files.py."""
DATA = "data.bin"
GIB = 1 << 30
LONG = 1800.0
"""Seconds any one step of a large size may take before the run gives up."""
UNITS = {"K": 10**3, "M": 10**6, "G": 10**9}
BEING_CREATED = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
"""The CSI snapshotter's mark on a content while it asks the driver for the snapshot."""


# --- what the cluster shows, timestamped as this host sees it -------------------------------


class ClaimTimes(Follower):
    """When each PVC of a namespace was first seen, and Bound."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        super().__init__(core.list_namespaced_persistent_volume_claim, namespace)
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        self.added.setdefault(obj.metadata.name, at)
        if obj.status is not None and obj.status.phase == "Bound":
            self.bound.setdefault(obj.metadata.name, at)


class SnapshotTimes(Follower):
    """When each VolumeSnapshot of a namespace was first seen, bound to the content
    the snapshot controller made for it (the CSI driver's work starts), and ready."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        super().__init__(
            custom.list_namespaced_custom_object,
            SNAPSHOT_GROUP,
            SNAPSHOT_VERSION,
            namespace,
            SNAPSHOTS,
        )
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.cut: dict[str, float] = {}
        self.ready: dict[str, float] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        self.added.setdefault(name, at)
        if status.get("boundVolumeSnapshotContentName"):
            self.bound.setdefault(name, at)
        if status.get("creationTime"):
            self.cut.setdefault(name, at)
        if status.get("readyToUse"):
            self.ready.setdefault(name, at)


class ContentTimes(Follower):
    """When the VolumeSnapshotContent of each VolumeSnapshot of a namespace (by the
    snapshot's name) was first seen (the snapshot controller made it), marked as
    being created (the CSI snapshotter is about to call the driver), and cut (its
    ``creationTime`` set by the CSI snapshotter); and the driver's own time of the
    cut, the ``creationTime`` itself (nanoseconds since the epoch, this host's clock)."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        super().__init__(
            custom.list_cluster_custom_object, SNAPSHOT_GROUP, SNAPSHOT_VERSION, SNAPSHOT_CONTENTS
        )
        self.namespace = namespace
        self.added: dict[str, float] = {}
        self.being_created: dict[str, float] = {}
        self.cut: dict[str, float] = {}
        self.driver_cut: dict[str, float] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        ref = (obj.get("spec") or {}).get("volumeSnapshotRef") or {}
        if ref.get("namespace") != self.namespace:
            return
        name = ref["name"]
        self.added.setdefault(name, at)
        if BEING_CREATED in (obj["metadata"].get("annotations") or {}):
            self.being_created.setdefault(name, at)
        created = (obj.get("status") or {}).get("creationTime")
        if created:
            self.being_created.setdefault(name, at)  # the mark came and went between events
            self.cut.setdefault(name, at)
            self.driver_cut.setdefault(name, int(created) / 1e9)


class CommitTimes(Follower):
    """When each save was first the committed version of its Workspace
    (``status.computerVersion``), or an older save of a version it passed over:
    the status mirror writes the newest version only, and a save committed within
    one of its intervals after another (the fill's, then the read turn's) is never
    named on its own; waiting for that name hung the run."""

    def __init__(self, custom: client.CustomObjectsApi, namespace: str) -> None:
        super().__init__(
            custom.list_namespaced_custom_object, GROUP, VERSION, namespace, WORKSPACES
        )
        self.committed: dict[str, float] = {}

    def note(self, change: str, obj: Any, at: float) -> None:
        version = (obj.get("status") or {}).get("computerVersion")
        if version:
            workspace, _, newest = version.rpartition("-save-")
            for older in range(1, int(newest) + 1):
                self.committed.setdefault(save_name(workspace, older), at)


@dataclass
class Watched:
    pods: PodTimes
    claims: ClaimTimes
    snapshots: SnapshotTimes
    contents: ContentTimes
    commits: CommitTimes

    async def wait(self, follower: Follower, record: dict[str, float], name: str) -> float:
        return await asyncio.to_thread(follower.wait, record, name, LONG)


@contextmanager
def watching(kubeconfig: str, namespace: str) -> Iterator[Watched]:
    """Each follower on an API client of its own (a watch holds its connection)."""
    watched = Watched(
        PodTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace),
        ClaimTimes(client.CoreV1Api(new_api_client(kubeconfig)), namespace),
        SnapshotTimes(client.CustomObjectsApi(new_api_client(kubeconfig)), namespace),
        ContentTimes(client.CustomObjectsApi(new_api_client(kubeconfig)), namespace),
        CommitTimes(client.CustomObjectsApi(new_api_client(kubeconfig)), namespace),
    )
    followers: list[Follower] = [
        watched.pods,
        watched.claims,
        watched.snapshots,
        watched.contents,
        watched.commits,
    ]
    for follower in followers:
        follower.start()
    try:
        yield watched
    finally:
        for follower in followers:
            follower.done.set()


# --- save and restore ---------------------------------------------------------------------


def store_save_times(
    store: Path, namespace: str, workspace: str, version: int
) -> tuple[float, float]:
    """When the operator took the save (``taken_at``: about to create its snapshot)
    and recorded its cut (``cut_at``: its Session's next Turn may run), as its store
    says (read-only; the operator's store is SQLite on this host)."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        taken, cut = db.execute(
            "SELECT taken_at, cut_at FROM saves"
            " WHERE namespace = ? AND workspace = ? AND version = ?",
            (namespace, workspace, version),
        ).fetchone()
    return datetime.fromisoformat(taken).timestamp(), datetime.fromisoformat(cut).timestamp()


async def save_and_restore(
    helmr: Client,
    store: Path,
    core: client.CoreV1Api,
    watched: Watched,
    namespace: str,
    workspace: str,
    size: int,
    sync: bool,
) -> dict[str, float]:
    """One sample: a turn fills the disk (fsynced before it completes, or not:
    ``sync``), its save commits, the runner is lost, and the next runner runs on
    the disk restored from that save."""
    session, _ = await helmr.actors.start(FILES, namespace=namespace, workspace=workspace)
    fill = await session.enqueue({"fill": {DATA: size}, "sync": sync})
    # Queued behind it: runs once the fill's save is cut (turn-aligned saves).
    after = await session.enqueue({"read": []})
    await _completed(session, after)
    events = await all_events(session)
    running = first(events, "turn.running", fill.id)
    completed = first(events, "turn.completed", fill.id)
    save = save_name(workspace, 1)
    created = await watched.wait(watched.snapshots, watched.snapshots.added, save)
    bound = await watched.wait(watched.snapshots, watched.snapshots.bound, save)
    cut = await watched.wait(watched.snapshots, watched.snapshots.cut, save)
    ready = await watched.wait(watched.snapshots, watched.snapshots.ready, save)
    committed = await watched.wait(watched.commits, watched.commits.committed, save)
    contents = watched.contents
    content_added = await watched.wait(contents, contents.added, save)
    being_created = await watched.wait(contents, contents.being_created, save)
    content_cut = await watched.wait(contents, contents.cut, save)
    taken, recorded = store_save_times(store, namespace, workspace, 1)
    out = {
        "fill_write": completed - running,
        "save_taken": taken - completed,
        "save_created": created - completed,
        "content_added": content_added - completed,
        "content_being_created": being_created - completed,
        "driver_cut": contents.driver_cut[save] - completed,
        "content_cut": content_cut - completed,
        "cut_recorded": recorded - completed,
        "save_bound": bound - completed,
        "save_cut": cut - completed,
        "turn_gap": first(events, "turn.running", after.id) - completed,
        "save_ready": ready - completed,
        "save_committed": committed - completed,
    }

    # Every completed Turn saved before the loss, so it leaves no recovery gap: a
    # gap holds the Session for acknowledgement, and the queued turn would wait
    # for a resume. (The read turn's save can still be in flight here: it is cut
    # at that turn's end only if the fill's save was committed by then, else it
    # is taken once the Session is idle. Lost before it is ready, the read turn is
    # in the gap: the first runs hung there, their check turn held.)
    await _saves_settled(helmr, namespace, workspace)
    busy = await session.enqueue({"sleep": 3600})
    check = await session.enqueue({"size": [DATA]})
    await eventually(lambda: _running(busy), timeout=LONG, what=f"turn {busy.id} running")
    view = await session.retrieve()
    lost_pod = pod_name(view.name, view.process_epoch)
    lost = time.time()
    await asyncio.to_thread(core.delete_namespaced_pod, lost_pod, namespace)
    checked = await _completed(session, check)
    assert checked.result == {"read": {}, "size": {DATA: size}}, checked.result
    events = await all_events(session)
    restored = claim_name(workspace, 2)
    view = await session.retrieve()
    runner = pod_name(view.name, view.process_epoch)
    claim_created = await watched.wait(watched.claims, watched.claims.added, restored)
    out |= {
        "loss_old_pod_gone": await watched.wait(watched.pods, watched.pods.gone, lost_pod) - lost,
        "loss_claim_created": claim_created - lost,
        "restore_claim_bound": (
            await watched.wait(watched.claims, watched.claims.bound, restored) - claim_created
        ),
        "loss_pod_running": await watched.wait(watched.pods, watched.pods.running, runner) - lost,
        "loss_turn_running": first(events, "turn.running", check.id) - lost,
    }
    out["fork_turn_running"] = await _fork_first_turn(helmr, session, fill, workspace, size)
    await _end(session, core, namespace)
    return out


async def _fork_first_turn(
    helmr: Client, session: SessionRef, fill: TurnRef, workspace: str, size: int
) -> float:
    """A fork of the session at the fill turn (its save of ``size`` bytes), from the
    fork call to its first ``turn.running``; the fork reads the file's size back."""
    forked_at = time.time()
    forked = await helmr.sessions.fork(session, at_turn=fill, workspace=f"{workspace}-fork")
    check = await forked.enqueue({"size": [DATA]})
    checked = await _completed(forked, check)
    assert checked.result == {"read": {}, "size": {DATA: size}}, checked.result
    running = first(await all_events(forked), "turn.running", check.id) - forked_at
    await forked.cancel()
    return running


async def _running(turn: TurnRef) -> bool:
    return (await turn.retrieve()).status == "running"


async def _completed(session: SessionRef, turn: TurnRef) -> Turn:
    """The turn once completed; a Session held meanwhile (its queue waits for a
    resume that the benchmark never sends) ends the run saying why, not in a hang."""

    async def outcome() -> Turn | None:
        state = await session.retrieve()
        if state.hold is not None:
            raise SystemExit(f"session {session.id} held ({state.hold.reason}): {turn.id} waits")
        view = await turn.retrieve()
        return view if view.status not in ("queued", "running") else None

    done: Turn = await eventually(outcome, timeout=LONG, what=f"turn {turn.id} ended")
    assert done.status == "completed", done
    return done


async def _saves_settled(helmr: Client, namespace: str, workspace: str) -> None:
    """Until the Workspace has no save pending: every completed Turn's is ready."""
    ref = helmr.workspaces.ref(f"{namespace}/{workspace}")

    async def settled() -> bool:
        return (await ref.retrieve()).pending_saves == 0

    await eventually(settled, timeout=LONG, what=f"workspace {workspace}'s saves settled")


async def _end(session: SessionRef, core: client.CoreV1Api, namespace: str) -> None:
    await session.cancel()
    await no_pods_left(core, namespace, RUNNER_LABEL)


# --- cold starts ----------------------------------------------------------------------------


async def helmr_cold_start(
    helmr: Client, core: client.CoreV1Api, watched: Watched, namespace: str, workspace: str
) -> tuple[dict[str, float], str]:
    """A session on a fresh Workspace, a turn enqueued, until that turn runs; and
    the node its runner ran on."""
    started = time.time()
    session, _ = await helmr.actors.start(FILES, namespace=namespace, workspace=workspace)
    turn = await session.enqueue({"read": []})
    assert (await turn.wait(timeout=LONG)).status == "completed"
    events = await all_events(session)
    view = await session.retrieve()
    runner = pod_name(view.name, view.process_epoch)
    claim = claim_name(workspace, 1)
    out = {
        "helmr_claim_bound": await watched.wait(watched.claims, watched.claims.bound, claim),
        "helmr_pod_running": await watched.wait(watched.pods, watched.pods.running, runner),
        "helmr_turn_running": first(events, "turn.running", turn.id),
    }
    node = watched.pods.nodes[runner]
    await _end(session, core, namespace)
    return {k: v - started for k, v in out.items()}, node


BARE_KINDS = ("bare", "emptydir", "pvc")
"""No volume; an emptyDir at the Computer's path; a fresh PVC there."""


async def bare_cold_start(
    core: client.CoreV1Api,
    watched: Watched,
    namespace: str,
    image: str,
    node: str,
    kind: str,
    name: str,
    disk_size: str,
) -> dict[str, float]:
    claim = f"{name}-disk" if kind == "pvc" else None
    volume = None
    if kind == "emptydir":
        volume = client.V1Volume(name="computer", empty_dir=client.V1EmptyDirVolumeSource())
    elif claim is not None:
        source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
        volume = client.V1Volume(name="computer", persistent_volume_claim=source)
    pod = bare_pod(name, image, node, BARE, volume)
    started = time.time()
    if claim is not None:
        await asyncio.to_thread(
            core.create_namespaced_persistent_volume_claim, namespace, fresh_claim(claim, disk_size)
        )
    await asyncio.to_thread(core.create_namespaced_pod, namespace, pod)
    running = await watched.wait(watched.pods, watched.pods.running, name)
    logged = await asyncio.to_thread(log_line_time, core, namespace, name)
    out = {f"{kind}_running": running - started, f"{kind}_log": logged - started}
    if claim is not None:
        bound = await watched.wait(watched.claims, watched.claims.bound, claim)
        out[f"{kind}_claim_bound"] = bound - started
    await asyncio.to_thread(core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)
    await no_pods_left(core, namespace, BARE_LABEL)
    if claim is not None:
        await asyncio.to_thread(core.delete_namespaced_persistent_volume_claim, claim, namespace)
    return out


async def cold_starts(
    helmr: Client,
    core: client.CoreV1Api,
    watched: Watched,
    namespace: str,
    image: str,
    samples: int,
    disk_size: str,
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for i in range(samples):
        helmr_times, node = await helmr_cold_start(helmr, core, watched, namespace, f"cold-{i}")
        times = [helmr_times]
        for kind in BARE_KINDS:
            name = f"{kind}-{i}"
            times.append(
                await bare_cold_start(core, watched, namespace, image, node, kind, name, disk_size)
            )
        for key, value in (pair for t in times for pair in t.items()):
            out.setdefault(key, []).append(value)
    return out


# --- setup and main -----------------------------------------------------------------------


def _workspace(size: int, sync: bool, sample: int) -> str:
    return f"fill-{size}-{sample}" if sync else f"fill-{size}-unsynced-{sample}"


def parse_size(text: str) -> int:
    """``100M`` → 100 000 000 bytes (decimal units, as "100 MB" and "1 GB" mean)."""
    unit = text[-1].upper()
    return int(float(text[:-1]) * UNITS[unit]) if unit in UNITS else int(text)


def size_label(size: int) -> str:
    for unit, scale in sorted(UNITS.items(), key=lambda u: -u[1]):
        if size >= scale:
            return f"{size / scale:g} {unit}B"
    return f"{size} B"


def disk_size(sizes: list[int]) -> str:
    """The Actor's ``computer.size``: room for the largest file twice over, at least 2Gi."""
    return f"{max(2, math.ceil(2 * max(sizes) / GIB))}Gi"


def storage_summary(api: client.ApiClient) -> str:
    """The default StorageClass and the VolumeSnapshotClasses the run measured."""
    default = "storageclass.kubernetes.io/is-default-class"
    storage = [
        f"{c.metadata.name} ({c.provisioner}, {c.volume_binding_mode})"
        for c in client.StorageV1Api(api).list_storage_class().items
        if c.metadata is not None and (c.metadata.annotations or {}).get(default) == "true"
    ]
    listed: Any = client.CustomObjectsApi(api).list_cluster_custom_object(
        SNAPSHOT_GROUP, SNAPSHOT_VERSION, "volumesnapshotclasses"
    )
    snapshots = [f"{c['metadata']['name']} ({c['driver']})" for c in listed["items"]]
    return (
        f"default storage class: {', '.join(storage) or 'none'};"
        f" snapshot classes: {', '.join(snapshots) or 'none'}"
    )


async def bench(args: argparse.Namespace) -> None:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        raise SystemExit("set KUBECONFIG to the cluster to measure")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    prepare(kubeconfig, args.build)
    image = conftest.RUNNER_IMAGE
    api = new_api_client(kubeconfig)
    core = client.CoreV1Api(api)
    print(storage_summary(api), flush=True)
    saves: dict[tuple[int, bool], list[dict[str, float]]] = {}
    kinds = [True, False] if args.unsynced else [True]
    disk = disk_size(sizes)
    with (
        control_plane(kubeconfig) as op,
        bench_namespace(core) as namespace,
        watching(kubeconfig, namespace) as watched,
    ):
        create_actor(
            api, namespace, image, FILES, entrypoint="files:files", computer={"size": disk}
        )
        async with Client(op.url, op.token) as helmr:
            print(f"cold: {args.cold} sessions and {args.cold} of each bare pod ...", flush=True)
            cold = await cold_starts(helmr, core, watched, namespace, image, args.cold, disk)
            for size in sizes:
                for sync in kinds:
                    label = f"{size_label(size)}{'' if sync else ' unsynced'}"
                    print(f"save and restore: {label} x {args.samples} ...", flush=True)
                    saves[(size, sync)] = [
                        await save_and_restore(
                            helmr,
                            Path(op.env["HELMR_STORE_PATH"]),
                            core,
                            watched,
                            namespace,
                            _workspace(size, sync, i),
                            size,
                            sync,
                        )
                        for i in range(args.samples)
                    ]

    table = Table()
    table.section(f"cold start (same image, same node; fresh PVCs of {disk})")
    bare = table.latency("bare pod, no volume: create -> Running", cold["bare_running"])
    table.latency("bare pod, no volume: create -> first log line", cold["bare_log"])
    table.latency("bare pod + emptyDir: create -> Running", cold["emptydir_running"])
    table.latency("bare pod + fresh PVC: create -> claim Bound", cold["pvc_claim_bound"])
    with_pvc = table.latency("bare pod + fresh PVC: create -> Running", cold["pvc_running"])
    table.latency("helmr: session start -> claim Bound", cold["helmr_claim_bound"])
    table.latency("helmr: session start -> runner pod Running", cold["helmr_pod_running"])
    helmr_cold = table.latency(
        "helmr: session start -> first turn.running", cold["helmr_turn_running"]
    )
    table.ratio("ratio bare+PVC Running / bare Running", with_pvc, bare)
    table.ratio("ratio helmr first turn.running / bare Running", helmr_cold, bare)
    table.ratio("ratio helmr first turn.running / bare+PVC Running", helmr_cold, with_pvc)
    for (size, sync), samples in saves.items():
        label = size_label(size)

        def column(key: str, samples: list[dict[str, float]] = samples) -> list[float]:
            return [s[key] for s in samples]

        how = "fsynced by the turn" if sync else "not fsynced: the cut flushes them"
        table.section(f"{label} of files on the Computer disk, {how}")
        table.latency("fill turn: turn.running -> turn.completed", column("fill_write"))
        table.latency("save: turn.completed -> taken (the operator's store)", column("save_taken"))
        table.latency("save: turn.completed -> VolumeSnapshot created", column("save_created"))
        table.latency("save: turn.completed -> content created", column("content_added"))
        table.latency(
            "save: turn.completed -> content marked being created", column("content_being_created")
        )
        table.latency("save: turn.completed -> the driver's cut (its time)", column("driver_cut"))
        table.latency("save: turn.completed -> content creationTime seen", column("content_cut"))
        table.latency(
            "save: turn.completed -> cut recorded (the operator's store)", column("cut_recorded")
        )
        table.latency("save: turn.completed -> content bound", column("save_bound"))
        table.latency("save: turn.completed -> snapshot's creationTime", column("save_cut"))
        table.latency(
            "turn.completed -> the next queued turn.running (waits for the cut)",
            column("turn_gap"),
        )
        table.latency("save: turn.completed -> readyToUse", column("save_ready"))
        table.latency("save: turn.completed -> status.computerVersion", column("save_committed"))
        table.latency("loss: pod delete -> old pod gone", column("loss_old_pod_gone"))
        table.latency("loss: pod delete -> restored claim created", column("loss_claim_created"))
        table.latency("restore: claim created -> Bound", column("restore_claim_bound"))
        table.latency("loss: pod delete -> new runner pod Running", column("loss_pod_running"))
        restore = table.latency(
            "loss: pod delete -> next turn.running", column("loss_turn_running")
        )
        table.ratio("ratio loss -> turn.running / helmr cold start", restore, helmr_cold)
        fork = table.latency(
            "fork at the fill turn -> the fork's first turn.running", column("fork_turn_running")
        )
        table.ratio("ratio fork -> first turn.running / helmr cold start", fork, helmr_cold)
    print()
    table.print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="100M,1G", help="bytes written per sample, comma-separated (K, M, G)"
    )
    parser.add_argument("--samples", type=int, default=3, help="save/restore samples per size")
    parser.add_argument("--cold", type=int, default=5, help="cold starts of each kind")
    parser.add_argument(
        "--unsynced",
        action="store_true",
        help="also fill without fsync at the turn's end (the save's cut flushes the data)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (1M,10M), one sample, 2 cold starts"
    )
    parser.add_argument(
        "--no-build", dest="build", action="store_false", help="reuse the imported runner image"
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.samples, args.cold = "1M,10M", 1, 2
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
