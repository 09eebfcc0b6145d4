"""What a runner process imports before it can receive: the cold-start budget.

Every runner pod pays for its imports before its first ``receive``
(benchmarks/bench_session_loop.py: session start -> first ``turn.running``).
The runner's path needs neither pydantic (the protocol's bodies are
dataclasses) nor aiohttp (``helmr.runner.http``), and never the control
plane. Asserted on what gets imported, not on time, so it cannot flake.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "pydantic_core", "aiohttp", "kopf", "kubernetes", "yarl", "multidict")
CONTROL_PLANE = ("helmr.control", "helmr.operator", "helmr.server", "helmr.store")
AVOIDABLE_STDLIB = ("uuid", "platform", "pathlib")
"""Standard modules the runner does without: uuid imports platform (random keys are
``os.urandom``), pathlib imports ntpath and fnmatch (the token file is a str path)."""


def imported_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"{statement}; import json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def within(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_the_runner_entrypoint_imports_no_pydantic_aiohttp_or_control_plane() -> None:
    modules = imported_by("import helmr.runner.entrypoint")

    assert "helmr.runner.transport" in modules  # the check sees the runner's real path
    assert within(modules, HEAVY) == []
    assert within(modules, CONTROL_PLANE) == []
    assert within(modules, AVOIDABLE_STDLIB) == []


def test_the_sdk_an_actor_imports_is_as_light() -> None:
    modules = imported_by("from helmr.runner import Message, Session, Turn, actor")

    assert within(modules, HEAVY) == []
    assert within(modules, CONTROL_PLANE) == []
