"""The Computer disk with real pods, PVCs and VolumeSnapshots: saves after completed
Turns, restore after execution loss, the recovery gap, idle suspension, and the
Workspace's exclusive hold (spec/000 Finalization, spec/001 "Helmr automatically
restores the last committed Computer version after execution loss", spec/002
``session.execution_lost``, ``session.recovery_gap``, ``turn.interrupted``
reason ``computer_execution_lost``).

The sessions run ``tests/actors/files.py``: ``{"write": {name: text}}``,
``{"read": [names]}`` and ``{"sleep": s}`` on the disk at ``HELMR_COMPUTER_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from functools import partial
from typing import Any

import pytest
from kubernetes import client
from pydantic import JsonValue

from helmr.client import Client, SecretSource, SessionRef, TurnRef
from helmr.errors import Conflict
from helmr.kube.client import refused_as_held
from helmr.kube.errors import translated
from helmr.resources import GROUP, VERSION, WORKSPACES

from .conftest import Operator, kubectl
from .pods import PodHistory
from .sessions import all_events, create_actor, event_data, eventually, runner_pods
from .test_session_env import digest
from .test_storage import MOUNT, claim, run_on_volume

WORKSPACE = "ws"
"""The Workspace every session here holds (``start_session``'s)."""


def files_actor(api_client: client.ApiClient, namespace: str, image: str, **spec: Any) -> str:
    return create_actor(api_client, namespace, image, "files", entrypoint="files:files", **spec)


def workspace_status(api_client: client.ApiClient, namespace: str) -> dict[str, Any]:
    try:
        got = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, WORKSPACES, WORKSPACE
        )
    except client.ApiException as e:
        if e.status == 404:
            return {}
        raise
    assert isinstance(got, dict)
    status: dict[str, Any] = got.get("status") or {}
    return status


async def completed(turn: TurnRef) -> Any:
    outcome = await turn.wait(timeout=120)
    assert outcome.status == "completed", outcome
    return outcome.result


async def running(turn: TurnRef) -> None:
    await eventually(lambda: _is_running(turn), timeout=120, what=f"turn {turn.id} running")


async def _is_running(turn: TurnRef) -> bool:
    return (await turn.retrieve()).status == "running"


async def lose_runner(core: client.CoreV1Api, namespace: str) -> None:
    """Deletes the runner pod, as an eviction or node loss would take it."""
    [pod] = runner_pods(core, namespace)
    core.delete_namespaced_pod(str(pod.metadata.name), namespace)


async def start(helmr: Client, namespace: str) -> SessionRef:
    session, _ = await helmr.actors.start("files", namespace=namespace, workspace=WORKSPACE)
    return session


async def files_session(
    helmr: Client, api_client: client.ApiClient, namespace: str, image: str, **spec: Any
) -> SessionRef:
    """A Session on ``WORKSPACE`` of the files actor, declared with ``spec``."""
    files_actor(api_client, namespace, image, **spec)
    return await start(helmr, namespace)


async def saves_settled(
    api_client: client.ApiClient, namespace: str, version: int | None = None
) -> None:
    """Until the Workspace's status shows no pending save and, given ``version``, that
    save committed (a status written before the last Turn's save was asked for shows
    none pending too)."""

    def settled() -> bool:
        status = workspace_status(api_client, namespace)
        committed = version is None or status.get("computerVersion") == save_of(version)
        return status.get("pendingSaves") == 0 and committed

    await eventually(settled, timeout=180, what=f"every save settled (save {version})")


def save_of(version: int) -> str:
    return f"{WORKSPACE}-save-{version}"


async def test_files_of_a_saved_turn_survive_the_loss_of_the_runner(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    session = await files_session(helmr, api_client, namespace, runner_image)
    await completed(await session.enqueue({"write": {"a.txt": "turn one"}}))
    saved = await eventually(
        lambda: workspace_status(api_client, namespace).get("computerVersion"),
        timeout=120,
        what="the first save to be ready",
    )
    assert saved == f"{WORKSPACE}-save-1"

    busy = await session.enqueue({"write": {"b.txt": "unsaved"}, "sleep": 300})
    await running(busy)
    await lose_runner(core, namespace)

    lost = await busy.wait(timeout=120)
    assert (lost.status, lost.reason) == ("interrupted", "computer_execution_lost")
    after = await completed(await session.enqueue({"read": ["a.txt", "b.txt"]}))
    # Restored from save 1: turn one's file is there, the lost turn's is not.
    assert after == {"read": {"a.txt": "turn one", "b.txt": None}}

    events = await all_events(session)
    [interrupted] = event_data(events, "turn.interrupted")
    assert interrupted == {
        "reason": "computer_execution_lost",
        "computerId": f"{WORKSPACE}-disk-1",
        "leaseEpoch": lost.epoch,
        "recoveryGap": False,
    }
    [execution_lost] = event_data(events, "session.execution_lost")
    assert execution_lost["computerVersion"] == saved
    [gap] = event_data(events, "session.recovery_gap")
    assert (gap["turnIds"], gap["holdId"], gap["restorePoint"]) == ([], None, saved)
    [failed] = event_data(events, "session.process_failed")
    assert (failed["reason"], failed["holdId"]) == ("execution_lost", None)
    status = workspace_status(api_client, namespace)
    assert (status["claimName"], status["restoredFrom"]) == (f"{WORKSPACE}-disk-2", saved)


def save_names(api_client: client.ApiClient, namespace: str) -> list[str]:
    snapshots = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "snapshot.storage.k8s.io", "v1", namespace, "volumesnapshots"
    )["items"]
    return sorted(str(s["metadata"]["name"]) for s in snapshots)


async def test_fast_turns_share_saves_and_a_loss_restores_the_newest_saved_state(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    """Turns completed while a save is being taken, or within the save policy's
    interval, do not each get a snapshot: the newest of them is taken, and covers
    the rest. The restore after a loss is still the last ready save, holding every
    Turn's files. (Saves are cut at Turns' ends, and the local driver makes a save
    ready as it cuts it, so a burst shares saves through ``saveIntervalSeconds``.)"""
    session = await files_session(
        helmr,
        api_client,
        namespace,
        runner_image,
        computer={"keepSaves": 20, "saveIntervalSeconds": 5},
    )
    writes = [await session.enqueue({"write": {f"g{i}.txt": f"v{i}"}}) for i in range(8)]
    for turn in writes:
        await completed(turn)
    # The last Turn's save (version 8) is taken, whatever it covered, and committed.
    await saves_settled(api_client, namespace, 8)
    taken = save_names(api_client, namespace)
    assert f"{WORKSPACE}-save-8" in taken
    assert 1 <= len(taken) < len(writes), taken

    busy = await session.enqueue({"write": {"late.txt": "unsaved"}, "sleep": 300})
    await running(busy)
    await lose_runner(core, namespace)
    lost = await busy.wait(timeout=120)
    assert (lost.status, lost.reason) == ("interrupted", "computer_execution_lost")

    names = [f"g{i}.txt" for i in range(8)]
    after = await completed(await session.enqueue({"read": [*names, "late.txt"]}))
    assert after == {"read": {**{n: f"v{i}" for i, n in enumerate(names)}, "late.txt": None}}
    events = await all_events(session)
    [execution_lost] = event_data(events, "session.execution_lost")
    assert execution_lost["computerVersion"] == f"{WORKSPACE}-save-8"
    [gap] = event_data(events, "session.recovery_gap")
    assert (gap["turnIds"], gap["holdId"]) == ([], None)  # every covered Turn was committed


async def test_a_runner_lost_mid_burst_leaves_a_gap_of_exactly_the_turns_after_the_restore(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    """Coalesced saves (issue 28, item 2): one save of a Workspace in flight at a
    time, the Turns completed meanwhile sharing the next one, which names them
    (``helmr.dev/turns``); a runner lost mid-burst restores the last ready save and
    the recovery gap is exactly the completed Turns after it. (A burst shares saves
    through ``saveIntervalSeconds``: see the test above.)"""
    session = await files_session(
        helmr,
        api_client,
        namespace,
        runner_image,
        computer={"keepSaves": 50, "saveIntervalSeconds": 5},
    )
    burst = [await session.enqueue({"write": {f"b{i}.txt": f"v{i}"}}) for i in range(12)]
    await completed(burst[5])
    during = save_names(api_client, namespace)
    await lose_runner(core, namespace)
    assert len(during) < 6, during  # six Turns completed, fewer snapshots taken

    events = await eventually(
        lambda: _events_once(session, "session.recovery_gap"), timeout=120, what="the loss"
    )
    lost_at = next(e.sequence for e in events if e.kind == "session.execution_lost")
    done = [e.turn_id for e in events if e.kind == "turn.completed" and e.sequence < lost_at]
    [execution_lost] = event_data(events, "session.execution_lost")
    [gap] = event_data(events, "session.recovery_gap")
    restored = execution_lost["computerVersion"]
    assert gap["restorePoint"] == restored
    saved = 0  # how many of the completed Turns the restored save holds
    if restored is not None:
        labels, turns = _save_turns(api_client, namespace, restored)
        saved = done.index(labels["helmr.dev/turn-id"]) + 1
        # The save names a run of completed Turns ending with its own.
        assert turns == done[saved - len(turns) : saved], (turns, done)
    assert gap["turnIds"] == done[saved:], (gap, done, restored)
    if gap["holdId"] is not None:
        await session.resume(hold_id=gap["holdId"])

    outcomes = [await turn.wait(timeout=120) for turn in burst]
    assert {o.status for o in outcomes} <= {"completed", "interrupted"}
    names: list[JsonValue] = [f"b{i}.txt" for i in range(saved)]
    after = await completed(await session.enqueue({"read": names}))
    assert after == {"read": {f"b{i}.txt": f"v{i}" for i in range(saved)}}


async def test_each_save_holds_exactly_its_own_turns_files_and_none_of_the_next(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    """Turn-aligned saves (issue 28, item 1): Turns queued at once, each writing its
    file the moment it runs; every save taken, restored into a claim of its own and
    listed, holds the files of its own Turn and those before it, and none of a
    later Turn's (the next Turn waited for the save's cut)."""
    session = await files_session(
        helmr, api_client, namespace, runner_image, computer={"keepSaves": 50}
    )
    burst = [await session.enqueue({"write": {f"t{i}.txt": f"v{i}"}}) for i in range(6)]
    for turn in burst:
        await completed(turn)
    await saves_settled(api_client, namespace, len(burst))
    ids = [turn.id for turn in burst]
    taken = save_names(api_client, namespace)
    assert taken, "no save was taken"
    for name in taken:
        labels, _ = _save_turns(api_client, namespace, name)
        own = ids.index(labels["helmr.dev/turn-id"])
        restored = f"r-{name}"
        source = {"api_group": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": name}
        core.create_namespaced_persistent_volume_claim(namespace, claim(restored, source))
        listed = await asyncio.to_thread(
            run_on_volume,
            core,
            namespace,
            restored,
            f"import json, os; print(json.dumps(sorted(os.listdir('{MOUNT}'))))",
        )
        expected = sorted(f"t{i}.txt" for i in range(own + 1))
        assert [f for f in json.loads(listed) if f.endswith(".txt")] == expected, (name, listed)


async def test_a_fork_at_turn_2_of_4_holds_turn_2s_files_and_its_source_runs_on(
    helmr: Client,
    api_client: client.ApiClient,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    """Fork (issue 28, item 5): a new Session on a new Workspace restored from the save
    of exactly Turn 2, holding Turn 2's files and none of Turn 3's; its lineage on the
    Workspace's status and in ``kubectl get hws``; the source untouched, running on."""
    session = await files_session(
        helmr, api_client, namespace, runner_image, computer={"keepSaves": 50}
    )
    turns = []
    for i in range(4):  # each save settled before the next Turn: each Turn has its own
        turns.append(await session.enqueue({"write": {f"f{i}.txt": f"v{i}"}}))
        await completed(turns[-1])
        await saves_settled(api_client, namespace, i + 1)
    forked = await helmr.sessions.fork(session, at_turn=turns[1], workspace="forked")
    names: list[JsonValue] = [f"f{i}.txt" for i in range(4)]
    read = await completed(await forked.enqueue({"read": names}))
    assert read == {"read": {"f0.txt": "v0", "f1.txt": "v1", "f2.txt": None, "f3.txt": None}}
    again = await completed(await session.enqueue({"read": names}))
    assert again == {"read": {f"f{i}.txt": f"v{i}" for i in range(4)}}

    workspace = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, WORKSPACES, "forked"
    )
    assert isinstance(workspace, dict)
    _, save_turns = _save_turns(api_client, namespace, f"{WORKSPACE}-save-2")
    assert save_turns == [turns[1].id]
    assert workspace["status"]["forkedFrom"] == {
        "session": session.id,
        "workspace": WORKSPACE,
        "save": f"{WORKSPACE}-save-2",
        "turn": turns[1].id,
    }
    shown = kubectl(kubeconfig, "get", "hws", "forked", "-n", namespace)
    assert shown.returncode == 0, shown.stderr
    assert "FORKED FROM" in shown.stdout
    assert f"{WORKSPACE}-save-2" in shown.stdout


async def _events_once(session: SessionRef, kind: str) -> list[Any] | None:
    """The Session's events once one of ``kind`` is among them."""
    events = await all_events(session)
    return events if any(e.kind == kind for e in events) else None


def _save_turns(
    api_client: client.ApiClient, namespace: str, name: str
) -> tuple[dict[str, str], list[str]]:
    """A save's labels and the Turns it says it holds."""
    snapshot = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        "snapshot.storage.k8s.io", "v1", namespace, "volumesnapshots", name
    )
    assert isinstance(snapshot, dict)
    meta = snapshot["metadata"]
    return meta["labels"], meta["annotations"]["helmr.dev/turns"].split(",")


async def test_a_disk_the_cluster_cannot_save_says_so_and_a_loss_says_nothing_was_saved(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    """Saves through a VolumeSnapshotClass that does not exist can never be made, as
    on a cluster without CSI snapshots: the Actor says so, no VolumeSnapshot is made,
    and a loss says nothing was saved and holds for the Turns whose files it lost."""
    files_actor(
        api_client,
        namespace,
        runner_image,
        computer={"volumeSnapshotClassName": "helmr-test-absent"},
    )
    saves = await eventually(
        lambda: actor_condition(api_client, namespace, "files", "SavesAvailable"),
        timeout=60,
        what="the Actor's SavesAvailable condition",
    )
    assert (saves["status"], saves["reason"]) == ("False", "SnapshotClassMissing")
    assert "helmr-test-absent" in saves["message"]
    session = await start(helmr, namespace)
    unsaved = await session.enqueue({"write": {"c.txt": "never saved"}})
    await completed(unsaved)
    # Given up at once, with no VolumeSnapshot made.
    await saves_settled(api_client, namespace)
    assert save_names(api_client, namespace) == []
    busy = await session.enqueue({"sleep": 300})
    await running(busy)
    await lose_runner(core, namespace)

    lost = await busy.wait(timeout=120)
    assert (lost.status, lost.reason) == ("interrupted", "computer_execution_lost")
    state = await eventually(lambda: _held(session), timeout=60, what="the recovery-gap hold")
    events = await all_events(session)
    [execution_lost] = event_data(events, "session.execution_lost")
    assert execution_lost["computerVersion"] is None
    assert "VolumeSnapshotClass helmr-test-absent" in execution_lost["savesUnavailable"]
    [gap] = event_data(events, "session.recovery_gap")
    assert gap["turnIds"] == [unsaved.id]
    assert gap["holdId"] == state.hold.hold_id
    assert gap["restorePoint"] is None
    assert event_data(events, "turn.interrupted")[0]["recoveryGap"] is True
    said = await eventually(
        lambda: _kube_events(core, namespace, "ExecutionLost"),
        timeout=60,
        what="the ExecutionLost Event",
    )
    assert "nothing was saved" in said[0]

    # Held until acknowledged: queued work waits, then runs on an empty disk.
    reader = await session.enqueue({"read": ["c.txt"]})
    assert (await reader.retrieve()).status == "queued"
    await session.resume(hold_id=state.hold.hold_id)
    assert await completed(reader) == {"read": {"c.txt": None}}


def actor_condition(
    api_client: client.ApiClient, namespace: str, actor: str, kind: str
) -> dict[str, Any] | None:
    got = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "actors", actor
    )
    assert isinstance(got, dict)
    conditions = (got.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def _kube_events(core: client.CoreV1Api, namespace: str, reason: str) -> list[str]:
    return [
        str(e.message) for e in core.list_namespaced_event(namespace).items if e.reason == reason
    ]


async def _held(session: SessionRef) -> Any:
    state = await session.retrieve()
    return state if state.hold is not None and state.hold.reason == "recovery_gap" else None


async def test_idle_suspension_keeps_the_files(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    session = await files_session(helmr, api_client, namespace, runner_image, idleTimeoutSeconds=1)
    first = await session.enqueue({"write": {"d.txt": "kept"}})
    await completed(first)
    await eventually(
        lambda: not runner_pods(core, namespace), timeout=120, what="the runner to suspend"
    )
    again = await completed(await session.enqueue({"read": ["d.txt"]}))
    assert again == {"read": {"d.txt": "kept"}}
    assert (await session.retrieve()).process_epoch == 2


async def test_a_held_workspace_is_exclusive_and_its_deletion_leaves_nothing(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
    kubeconfig: str,
) -> None:
    session = await files_session(helmr, api_client, namespace, runner_image)
    await completed(await session.enqueue({"write": {"e.txt": "x"}}))
    await eventually(
        lambda: workspace_status(api_client, namespace).get("computerVersion"),
        timeout=120,
        what="a ready save",
    )

    with pytest.raises(Conflict, match=session.id):
        await start(helmr, namespace)
    refused = kubectl(kubeconfig, "delete", "workspace", WORKSPACE, "-n", namespace)
    assert refused.returncode != 0
    assert f"held by Session {(await session.retrieve()).name}" in refused.stderr

    await session.close()
    await eventually(lambda: _closed(session), timeout=120, what="the session to close")
    await eventually(
        lambda: workspace_status(api_client, namespace).get("heldBy") is None,
        timeout=60,
        what="the hold to be released in the Workspace status",
    )
    deleted = kubectl(kubeconfig, "delete", "workspace", WORKSPACE, "-n", namespace, "--wait")
    assert deleted.returncode == 0, deleted.stderr

    def leftovers() -> list[str]:
        claims = core.list_namespaced_persistent_volume_claim(namespace).items
        contents = client.CustomObjectsApi(api_client).list_cluster_custom_object(
            "snapshot.storage.k8s.io", "v1", "volumesnapshotcontents"
        )["items"]
        ours = [c for c in contents if c["spec"]["volumeSnapshotRef"]["namespace"] == namespace]
        names = [str(c.metadata.name) for c in claims] + save_names(api_client, namespace)
        return names + [str(c["metadata"]["name"]) for c in ours]

    await eventually(lambda: not leftovers(), timeout=120, what="no claim or save left")


async def test_a_workspace_is_deleted_through_the_api_as_soon_as_its_session_reads_closed(
    helmr: Client,
    api_client: client.ApiClient,
    namespace: str,
    runner_image: str,
) -> None:
    """Issue 25, item 5: the Session reads closed before the status mirror clears the
    Workspace's holder, which the admission policy checks; the delete right then
    succeeds (it was a 500), and a refusal for a holder is a 409 naming it."""
    session = await files_session(helmr, api_client, namespace, runner_image)
    await completed(await session.enqueue({"write": {"d.txt": "x"}}))
    state = await session.retrieve()
    workspace = helmr.workspaces.ref(state.workspace_id)
    with pytest.raises(Conflict, match=session.id) as held:
        await workspace.delete()
    assert held.value.details["held_by"] == state.name
    await eventually(
        lambda: workspace_status(api_client, namespace).get("heldBy") == state.name,
        timeout=60,
        what="the Workspace status to name its holder",
    )
    # The admission policy's own refusal is the one the API maps to a 409.
    with pytest.raises(client.ApiException) as refused:
        client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, WORKSPACES, WORKSPACE
        )
    assert refused_as_held(translated(refused.value)), refused.value.body

    await session.close()
    async for event in session.events.stream():  # the moment the store closed it
        if event.kind == "session.closed":
            break
    assert (await session.retrieve()).status == "closed"
    deleted = await workspace.delete()

    assert deleted.name == WORKSPACE

    def gone() -> bool:  # a Workspace that is gone reads as no status
        return not workspace_status(api_client, namespace) and not save_names(api_client, namespace)

    await eventually(gone, timeout=120, what="the Workspace and its saves gone")


async def _ended_or_acknowledged(session: SessionRef, turn: TurnRef) -> str | None:
    """``turn``'s status once it ended (completed, or interrupted by a loss); resumes a
    recovery-gap hold on the way."""
    if (held := await _held(session)) is not None:
        await session.resume(hold_id=held.hold.hold_id)
    state = await turn.retrieve()
    assert state.status in ("queued", "running", "completed", "interrupted"), state
    return None if state.status in ("queued", "running") else state.status


async def _closed(session: SessionRef) -> bool:
    return (await session.retrieve()).status == "closed"


def _snapshot_uids(api_client: client.ApiClient, namespace: str) -> dict[str, str]:
    snapshots = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "snapshot.storage.k8s.io", "v1", namespace, "volumesnapshots"
    )["items"]
    return {str(s["metadata"]["name"]): str(s["metadata"]["uid"]) for s in snapshots}


BURSTS = 8
BURST = 3


async def test_operator_sigkilled_during_coalesced_saves_loses_none_duplicates_none_replays_none(
    operator: Operator,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
    pod_history: PodHistory,
) -> None:
    """Saves coalesced (at most one per 2 s: the Turns of a burst share one) while the
    operator is SIGKILLed 8 times, each during a burst of 3 writes, once its first
    completed (the others running or queued, their saves pending, covered or being
    taken); every third time the runner pod is lost too while the operator is down,
    so the restore runs after the restart. Then: every completed Turn's file is on
    the disk, or that Turn is named in a recovery gap (no save lost silently); no
    save duplicated (each snapshot made once, and no Turn in two saves); fewer
    snapshots than completed Turns (coalesced); no Turn ran twice; never two
    runner pods, so never two writers of one disk."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    computer = {"keepSaves": 100, "saveIntervalSeconds": 2}
    files_actor(api_client, namespace, runner_image, computer=computer)
    async with Client(operator.url, operator.token) as helmr:
        session_id = (await start(helmr, namespace)).id
    writes: list[tuple[str, str]] = []  # each write's file and Turn id
    snapshots: dict[str, str] = {}  # every snapshot seen, by name: its uid
    try:
        for i in range(BURSTS):
            async with Client(operator.url, operator.token) as helmr:
                session = helmr.sessions.ref(session_id)
                burst = []
                for j in range(BURST):
                    name = f"f{i}-{j}"
                    burst.append((name, (await session.enqueue({"write": {name: name}})).id))
                # A loss whose gap named completed work holds the session: acknowledge it.
                await eventually(
                    partial(_ended_or_acknowledged, session, session.turn(burst[0][1])),
                    timeout=180,
                    what=f"burst {i}'s first write ended",
                )
                writes += burst
            await asyncio.sleep(rng.uniform(0.0, 0.5))
            operator.kill()
            if i % 3 == 2 and runner_pods(core, namespace):
                await lose_runner(core, namespace)
            seen = _snapshot_uids(api_client, namespace)
            assert all(snapshots.get(n, uid) == uid for n, uid in seen.items()), (seen, seed)
            snapshots |= seen
            operator.start()
    finally:
        if operator.process is None or operator.process.poll() is not None:
            operator.start()  # leave the shared operator running for the next test

    async with Client(operator.url, operator.token) as helmr:
        session = helmr.sessions.ref(session_id)
        ended = {}
        for name, turn_id in writes:
            ended[name] = await eventually(
                partial(_ended_or_acknowledged, session, session.turn(turn_id)),
                timeout=180,
                what=f"{name} ended",
            )
        reader = await session.enqueue({"read": [name for name, _ in writes]})
        await eventually(
            partial(_ended_or_acknowledged, session, reader), timeout=180, what="the final read"
        )
        final: dict[str, Any] = (await reader.retrieve()).result  # type: ignore[assignment]
        events = await all_events(session)
    await saves_settled(api_client, namespace)
    pod_history.stop()

    context = f"seed {seed}"
    gaps = {turn for gap in event_data(events, "session.recovery_gap") for turn in gap["turnIds"]}
    done = [(name, turn_id) for name, turn_id in writes if ended[name] == "completed"]
    for name, turn_id in done:
        assert final["read"][name] == name or turn_id in gaps, (name, final, gaps, context)
    seen = _snapshot_uids(api_client, namespace)
    assert all(snapshots.get(n, uid) == uid for n, uid in seen.items()), (seen, context)
    # Each save holds a run of Turns no other save holds (completed writes, and the final
    # read, whose save is taken once the Session is idle); together fewer saves than Turns.
    saved = [t for name in seen for t in _save_turns(api_client, namespace, name)[1]]
    assert len(saved) == len(set(saved)), (saved, context)
    completed_turns = {turn_id for _, turn_id in done} | {reader.id}
    assert set(saved) <= completed_turns, (saved, done, reader.id, context)
    assert len(snapshots | seen) < len(done), (sorted(snapshots | seen), len(done), context)
    running = Counter(e.turn_id for e in events if e.kind == "turn.running")
    assert set(running.values()) == {1}, (running, context)
    assert max(pod_history.live_counts) == 1, (pod_history.live_counts, context)


async def test_a_fork_runs_with_its_sources_settings_unless_it_names_its_own(
    helmr: Client,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    runner_image: str,
) -> None:
    """A fork's runner gets its source Session's env and envFrom (issue 28); a fork
    naming env gets those only."""
    body = client.V1Secret(metadata=client.V1ObjectMeta(name="team"), string_data={"TOKEN": "t"})
    core.create_namespaced_secret(namespace, body)
    create_actor(api_client, namespace, runner_image, "settings", entrypoint="settings:settings")
    source, _ = await helmr.actors.start(
        "settings",
        namespace=namespace,
        workspace=WORKSPACE,
        env={"MODEL": "small"},
        env_from=[SecretSource(secret="team", prefix="T_")],
    )
    names: list[JsonValue] = ["MODEL", "T_TOKEN"]
    turn = await source.enqueue(names)
    await completed(turn)
    await saves_settled(api_client, namespace, 1)

    inherited = await helmr.sessions.fork(source, at_turn=turn, workspace="inherits")
    own = await helmr.sessions.fork(source, at_turn=turn, workspace="own", env={"MODEL": "large"})
    assert await completed(await inherited.enqueue(names)) == {
        "MODEL": digest("small"),
        "T_TOKEN": digest("t"),
    }
    assert await completed(await own.enqueue(names)) == {"MODEL": digest("large"), "T_TOKEN": None}
