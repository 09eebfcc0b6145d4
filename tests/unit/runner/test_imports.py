"""What a runner process imports before it can receive: the cold-start budget.

Every runner pod pays for its imports before its first ``receive``
(benchmarks/bench_session_loop.py: session start -> first ``turn.running``).
The runner's path needs neither pydantic (the protocol's bodies are
dataclasses) nor aiohttp (``helmr.runner.http``), and never the control
plane. Asserted on what gets imported, not on time, so it cannot flake.
"""

from __future__ import annotations

from tests.unit.imports import imported_by, within

HEAVY = ("pydantic", "pydantic_core", "aiohttp", "kopf", "kubernetes", "yarl", "multidict")
CONTROL_PLANE = ("helmr.control", "helmr.operator", "helmr.server", "helmr.store")
AVOIDABLE_STDLIB = ("uuid", "platform", "pathlib")
"""Standard modules the runner does without: uuid imports platform (random keys are
``os.urandom``), pathlib imports ntpath and fnmatch (the token file is a str path)."""


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
