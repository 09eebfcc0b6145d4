"""Which warm wait a runner process uses (issue 9, item 4): ``actor({ idleTimeout })``
in code is honoured; a manifest that sets none never overrides it."""

from __future__ import annotations

from helmr.runner import actor
from helmr.runner.actor import DEFAULT_IDLE_TIMEOUT
from helmr.runner.entrypoint import Config, idle_timeout


async def _run(session: object) -> None:
    return None


def config(manifest: float | None) -> Config:
    return Config(
        url="http://cp",
        session_id="ses_1",
        token_file="/var/run/helmr/token",
        epoch=1,
        entrypoint="m:a",
        idle_timeout=manifest,
    )


def test_the_code_s_idle_timeout_applies_when_no_manifest_sets_one() -> None:
    assert idle_timeout(config(None), actor(id="a", run=_run, idle_timeout=42)) == 42


def test_a_manifest_that_sets_one_is_enforced_over_the_code() -> None:
    assert idle_timeout(config(7), actor(id="a", run=_run, idle_timeout=42)) == 7


def test_neither_gives_the_runner_s_default() -> None:
    assert idle_timeout(config(None), actor(id="a", run=_run)) == DEFAULT_IDLE_TIMEOUT == 300
