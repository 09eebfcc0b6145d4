"""``pod_outcome``: how a runner pod's end is read (exit, or execution loss)."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.operator.runners.pod_reports import pod_outcome


def pod(phase: str | None, exit_code: int | None = None, **metadata: Any) -> dict[str, Any]:
    containers = []
    if exit_code is not None:
        containers = [{"state": {"terminated": {"exitCode": exit_code}}}]
    return {"metadata": metadata, "status": {"phase": phase, "containerStatuses": containers}}


@pytest.mark.parametrize("phase", [None, "Pending", "Running"])
def test_a_pod_still_running_is_running(phase: str | None) -> None:
    assert pod_outcome(pod(phase)) == ("running", None)
    assert pod_outcome(pod(phase, deletionTimestamp="2024-01-01T00:00:00Z")) == ("running", None)


@pytest.mark.parametrize(("phase", "code"), [("Failed", 3), ("Failed", 1), ("Succeeded", 0)])
def test_a_process_that_ended_on_its_own_exited_with_its_code(phase: str, code: int) -> None:
    assert pod_outcome(pod(phase, code)) == ("exited", code)


@pytest.mark.parametrize(("phase", "code"), [("Succeeded", 0), ("Failed", 137), ("Failed", 1)])
def test_a_process_that_ended_after_its_pod_was_deleted_was_lost(phase: str, code: int) -> None:
    # SIGTERM makes the runner exit 0; a handler ignoring it is killed (137).
    deleted = pod(phase, code, deletionTimestamp="2024-01-01T00:00:00Z")
    assert pod_outcome(deleted) == ("lost", None)


def test_an_evicted_pod_was_lost() -> None:
    evicted = pod("Failed")
    evicted["status"]["reason"] = "Evicted"
    assert pod_outcome(evicted) == ("lost", None)
    assert pod_outcome(pod("Failed")) == ("lost", None)  # no container status at all
