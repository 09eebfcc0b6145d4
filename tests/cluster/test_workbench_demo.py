"""The workbench demo (``make demo``'s second part, examples/workbench/demo.py) on
a cluster that cannot save the disk, as one without CSI snapshots (issue 28,
item 6): its Actor names a VolumeSnapshotClass that does not exist. The demo runs
to its end all the same, says why the disk is never saved, acknowledges the
recovery gap the loss holds the Session for, and its turn 3 finds none of turn
1's files."""

from __future__ import annotations

import asyncio
import os
import sys

from kubernetes import client

from .conftest import REPO, Operator
from .sessions import create_actor, eventually
from .test_computer import actor_condition

DEMO = REPO / "examples" / "workbench" / "demo.py"


async def test_the_workbench_demo_runs_on_a_cluster_that_cannot_save_its_disk(
    operator: Operator,
    api_client: client.ApiClient,
    kubeconfig: str,
    namespace: str,
    runner_image: str,
) -> None:
    create_actor(
        api_client,
        namespace,
        runner_image,
        "workbench",
        entrypoint="workbench.agent:workbench",
        maxTurnDurationSeconds=300,
        computer={"volumeSnapshotClassName": "helmr-test-absent"},
    )
    await eventually(
        lambda: actor_condition(api_client, namespace, "workbench", "SavesAvailable"),
        timeout=60,
        what="the Actor's SavesAvailable condition",
    )
    env = os.environ | {
        "HELMR_URL": operator.url,
        "HELMR_TOKEN": operator.token,
        "KUBECONFIG": kubeconfig,
    }
    demo = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DEMO),
        namespace,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    printed, _ = await asyncio.wait_for(demo.communicate(), 420)
    out = printed.decode()
    assert demo.returncode == 0, out
    assert "# this cluster cannot save the disk: VolumeSnapshotClass helmr-test-absent" in out
    assert "# held: recovery_gap; acknowledged" in out
    assert "nothing was saved" in out  # the loss's own words, in its timeline line
    assert "turn 3: completed" in out
    assert "--- refused: plan.md is not a file" in out
    assert "--- plan.md" not in out
