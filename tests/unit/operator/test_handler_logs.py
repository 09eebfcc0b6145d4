"""kopf's routine success lines are dropped, as kopf writes them, and nothing else of
kopf's: not a failure or retry, nor the one summary of a creation or update."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import kopf
import pytest

from helmr.operator.kopf import handlers
from helmr.operator.kopf.handler_logs import KOPF_OBJECTS, RoutineSuccesses


@pytest.fixture
def filtered(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    quiet = RoutineSuccesses()
    KOPF_OBJECTS.addFilter(quiet)
    caplog.set_level(logging.INFO, logger=KOPF_OBJECTS.name)
    try:
        yield caplog
    finally:
        KOPF_OBJECTS.removeFilter(quiet)


def test_every_handlers_success_and_a_clean_resume_are_dropped(
    filtered: pytest.LogCaptureFixture,
) -> None:
    # The handlers as kopf registered them, and its line (kopf._core.actions.execution).
    registry = kopf.get_default_registry()
    registered = [
        *registry._watching.get_all_handlers(),
        *registry._changing.get_all_handlers(),
    ]
    assert {"session_deleted", "runner_pod_event", "session_admit", "turn_admit"} <= {
        handler.id for handler in registered
    }
    assert handlers.session_admit in {handler.fn for handler in registered}
    for handler in registered:
        KOPF_OBJECTS.info(f"{handler} succeeded.")
    # kopf._core.reactor.processing, after the resume handlers of one object.
    KOPF_OBJECTS.info("Resuming is processed: 2 succeeded; 0 failed.")

    assert filtered.records == []


def test_failures_retries_and_applied_objects_outcomes_are_kept(
    filtered: pytest.LogCaptureFixture,
) -> None:
    kept = [
        "Handler 'session_deleted' failed with an exception and will try again in 60 seconds: x",
        "Handler 'turn_admit' failed temporarily: Session demo is not admitted yet",
        "Resuming is processed: 0 succeeded; 1 failed.",
        "Creation is processed: 1 succeeded; 0 failed.",
        "Updating is processed: 1 succeeded; 0 failed.",
        "Handler 'session_admit' succeeded. (not kopf's line)",
    ]
    for line in kept:
        KOPF_OBJECTS.info(line)

    assert [record.getMessage() for record in filtered.records] == kept
