"""What ``helmr dev`` loads before it listens: its cold start (benchmarks/bench_dev_cold_start.py).

The operator's handlers are registered by ``helmr.operator.kopf`` alone, the
module ``kopf run -m`` names (the chart, the images, the cluster tests); the
rooms ``helmr dev`` reuses (supervisor, disks, mirror) load neither kopf nor the
Kubernetes client. Asserted on what a fresh interpreter imports, never on time.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.imports import imported_by, within

NOT_FOR_DEV = ("kopf", "kubernetes")


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
