"""``helmr dev``'s plane end to end: runner processes with a pod's environment, the
Computer a directory saved after Turns and restored after execution loss, and
runners replaced at a Turn boundary when the actor's files change."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from helmr.client import Client
from helmr.dev import DevOptions, DevPlane
from helmr.operator.disks.manifests import disk_usage_spec
from helmr.operator.runners.pods import RunnerSpec, build_runner_pod_spec
from helmr.protocol import contract
from helmr.testing import Plane, StartPlane

ACTORS = Path(__file__).parents[2] / "actors"
ENVIRONMENT_ACTOR = """
import os
from helmr.runner import actor

async def run(session):
    while (turn := await session.receive()) is not None:
        if isinstance(turn.input, dict) and "sleep" in turn.input:
            import asyncio
            await asyncio.sleep(turn.input["sleep"])
        env = {k: v for k, v in os.environ.items() if k.startswith("HELMR_")}
        await turn.complete({"env": env, "version": VERSION})

VERSION = 1
environment = actor(id="environment", run=run)
"""


def actor_dir(root: Path, name: str, entrypoint: str) -> Path:
    """An actor directory as an author writes it: its code and its actor.yaml."""
    path = root / name
    path.mkdir(parents=True)
    (path / "actor.yaml").write_text(
        "apiVersion: helmr.dev/v1alpha1\nkind: Actor\n"
        f"metadata: {{name: {name}}}\n"
        f"spec: {{image: local/dev, entrypoint: '{entrypoint}'}}\n"
    )
    return path


@pytest.fixture
def files_actor(tmp_path: Path) -> str:
    path = actor_dir(tmp_path, "files", "files:files")
    shutil.copy(ACTORS / "files.py", path / "files.py")
    return str(path)


@pytest.fixture
def environment_actor(tmp_path: Path) -> Path:
    path = actor_dir(tmp_path, "environment", "environment:environment")
    (path / "environment.py").write_text(ENVIRONMENT_ACTOR)
    return path


async def test_a_runner_process_gets_a_runner_pods_environment(
    helmr_dev: StartPlane, environment_actor: Path
) -> None:
    plane = await helmr_dev(str(environment_actor))
    session = await plane.session()

    turn = await session.run("env")

    assert isinstance(turn.result, dict)
    env = turn.result["env"]
    assert isinstance(env, dict)
    view = await session.retrieve()
    spec = RunnerSpec(
        namespace=view.namespace,
        session_name=view.name,
        session_uid="uid",
        session_id=view.id,
        epoch=1,
        actor=plane.dev.source.actor,
        runner_url=plane.url,
        claim_name="claim",
        disk_usage=disk_usage_spec(plane.dev.source.actor.spec.computer),
    )
    container = build_runner_pod_spec(spec)["spec"]["containers"][0]
    assert set(env) == {e["name"] for e in container["env"]}
    assert env["HELMR_PROTOCOL"] == str(contract.PROTOCOL)
    assert env["HELMR_COMPUTER_DIR"] == str(await session.computer())
    assert env["HELMR_URL"] == plane.url


async def test_files_survive_execution_loss_restored_from_the_last_save(
    helmr_dev: StartPlane, files_actor: str
) -> None:
    plane = await helmr_dev(files_actor)
    session = await plane.session()
    await session.run({"write": {"notes.txt": "turn 1"}})
    version = await session.saved()
    first_disk = await session.computer()
    lost = await session.enqueue({"write": {"late.txt": "unsaved"}, "sleep": 60})
    await session.running(lost)

    session.lose_execution()

    assert (await session.ended(lost)).reason == "computer_execution_lost"
    read = await session.run({"read": ["notes.txt", "late.txt"]})
    assert read.result == {"read": {"notes.txt": "turn 1", "late.txt": None}}
    lost_event = await session.wait_for("session.execution_lost")
    assert isinstance(lost_event.data, dict)
    assert lost_event.data["computerVersion"] == version
    assert await session.computer() != first_disk
    assert not first_disk.exists()


async def test_a_changed_actor_replaces_its_runner_at_the_next_turn_boundary(
    tmp_path: Path, environment_actor: Path
) -> None:
    options = DevOptions(
        root=tmp_path / "state", runner_logs=True, watch_interval=0.05, reconcile_interval=0.2
    )
    async with DevPlane(str(environment_actor), options) as dev, Client(dev.url, dev.token) as c:
        session = await Plane(dev, c).session()
        first = await session.run("before")
        during = await session.enqueue({"sleep": 1})
        await session.running(during)

        code = environment_actor / "environment.py"
        code.write_text(code.read_text().replace("VERSION = 1", "VERSION = 2"))

        ended = await session.ended(during)
        stopped = await session.wait_for("session.process_stopped")
        after = await session.run("after")

    assert (ended.status, ended.reason) == ("completed", None)
    assert isinstance(first.result, dict)
    assert isinstance(ended.result, dict)
    assert (first.result["version"], ended.result["version"]) == (1, 1)
    assert isinstance(after.result, dict)
    assert after.result["version"] == 2
    assert stopped.data == {"processEpoch": 1, "reason": "code_changed"}


async def test_a_plain_directory_of_modules_runs_named_as_in_its_image(
    helmr_dev: StartPlane, tmp_path: Path
) -> None:
    """No ``__init__.py``, the module named after its directory, the entrypoint
    ``<directory>.<module>:<attr>`` as ``helmr actor build`` lays it out."""
    path = actor_dir(tmp_path, "plain", "plain.plain:environment")
    (path / "plain.py").write_text(ENVIRONMENT_ACTOR)
    plane = await helmr_dev(str(path))
    session = await plane.session()

    turn = await session.run("hello")

    assert turn.status == "completed"
    assert isinstance(turn.result, dict)
    assert turn.result["version"] == 1


async def test_history_past_its_retention_expires_as_the_operator_expires_it(
    helmr_dev: StartPlane, environment_actor: Path
) -> None:
    plane = await helmr_dev(str(environment_actor), history_retention=timedelta(seconds=1))
    session = await plane.session()
    old = await session.enqueue("old")
    assert (await session.ended(old)).payload_expired is False

    view = await session.turn_until(old, lambda t: t.payload_expired)

    assert (view.status, view.input, view.result) == ("completed", None, None)


FAILING_ACTOR = """
from helmr.runner import actor

async def run(session):
    raise RuntimeError("this actor cannot start")

failing = actor(id="failing", run=run)
"""


async def test_a_runner_idle_past_its_timeout_ends_and_the_next_turn_starts_another(
    helmr_dev: StartPlane, environment_actor: Path
) -> None:
    plane = await helmr_dev(str(environment_actor), spec={"idleTimeoutSeconds": 1})
    session = await plane.session()
    await session.run("first")

    stopped = await session.wait_for("session.process_stopped")
    second = await session.run("second")

    assert stopped.data == {"processEpoch": 1, "reason": "exited"}
    assert second.status == "completed"
    assert (await session.retrieve()).process_epoch == 2


async def test_three_process_failures_hold_the_session(
    helmr_dev: StartPlane, tmp_path: Path
) -> None:
    path = actor_dir(tmp_path, "failing", "failing:failing")
    (path / "failing.py").write_text(FAILING_ACTOR)
    plane = await helmr_dev(str(path))
    session = await plane.session()

    await session.enqueue("never runs")
    held = await session.until(lambda s: s.hold is not None, timeout=60)

    assert held.hold is not None
    assert held.hold.reason == "process_failures"
    assert held.process_epoch == 3


async def test_a_computer_full_past_stop_at_stops_the_running_turn(helmr_dev: StartPlane) -> None:
    echo = str(Path(__file__).parents[3] / "examples" / "echo")
    computer = {"size": "8Mi", "usageIntervalSeconds": 1}
    plane = await helmr_dev(echo, spec={"computer": computer})
    session = await plane.session()
    running = await session.enqueue(" ".join(["word"] * 1000))
    await session.running(running)

    await session.fill_computer(0.99)

    stopped = await session.ended(running)
    assert (stopped.status, stopped.reason) == ("interrupted", "storage_exhausted")
    held = await session.until(lambda s: s.hold is not None)
    assert held.hold is not None
    assert held.hold.reason == "storage_pressure"


async def test_a_fork_starts_on_a_copy_of_the_save_of_its_turn(
    helmr_dev: StartPlane, files_actor: str
) -> None:
    """Fork on the dev plane: the fork's directory is restored from the save of the
    Turn forked at, never started empty."""
    plane = await helmr_dev(files_actor)
    session = await plane.session()
    first = await session.run({"write": {"notes.txt": "turn 1"}})
    await session.saved()
    await session.run({"write": {"later.txt": "turn 2"}})
    view = await session.retrieve()
    forked = await plane.dev.control.fork_session(
        source_id=view.id, at_turn=first.id, name="forked", workspace="forked"
    )
    await plane.dev.disks.prepare(forked, plane.dev.source.actor)
    disk = await plane.dev.disks.computer(forked)
    assert sorted(p.name for p in disk.iterdir()) == ["notes.txt"]
    await plane.dev.control.cancel(forked.id)
