"""What ``helmr dev`` loads before it listens: its cold start (benchmarks/bench_dev_cold_start.py).

The operator's handlers are registered by ``helmr.operator.kopf`` alone, the
module ``kopf run -m`` names (the chart, the images, the cluster tests); the
rooms ``helmr dev`` reuses (supervisor, disks, mirror) load neither kopf nor the
Kubernetes client. Asserted on what a fresh interpreter imports, never on time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.imports import imported_by, within

NOT_FOR_DEV = ("kopf", "kubernetes")
ECHO = Path(__file__).parents[3] / "examples" / "echo"


@pytest.mark.parametrize(
    "statement",
    [
        "from helmr.dev.command import serve; from helmr.dev.plane import DevPlane",
        "import helmr.testing.plane",
    ],
)
def test_the_dev_plane_loads_neither_kopf_nor_the_kubernetes_client(statement: str) -> None:
    modules = imported_by(statement)

    assert "helmr.operator.runners.supervisor" in modules  # the operator's rooms are there
    assert "helmr.kube.client" in modules  # and the modules that call the client
    assert within(modules, NOT_FOR_DEV) == []


A_FIRST_TURN = """
import asyncio, sys, tempfile
from pathlib import Path
from helmr.client import Client
from helmr.dev import DevOptions, DevPlane

async def first_turn():
    with tempfile.TemporaryDirectory() as root:
        options = DevOptions(root=Path(root), reload=False)
        async with DevPlane(ECHO, options) as plane:
            async with Client(plane.url, plane.token) as client:
                session, _ = await client.actors.start("echo", namespace="default", workspace="w")
                await (await session.enqueue("hello")).wait(timeout=60)

asyncio.run(first_turn())
"""


def test_a_sessions_first_turn_loads_neither_kopf_nor_the_kubernetes_client() -> None:
    """Nor later: a Computer directory sized, a runner started, a Turn run."""
    modules = imported_by(f"ECHO = {str(ECHO)!r}\n{A_FIRST_TURN}")

    assert "helmr.dev.directories" in modules
    assert within(modules, NOT_FOR_DEV) == []


def test_the_module_kopf_runs_registers_the_handlers() -> None:
    code = (
        "import kopf, helmr.operator.kopf;"
        " r = kopf.get_default_registry();"
        " print(len([*r._changing.get_all_handlers(), *r._watching.get_all_handlers()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert int(out.stdout.split()[-1]) > 0
