"""kopf's success line of each watch event is dropped, as kopf writes it, and nothing
else of kopf's: not a watch handler's failure, nor another handler's success."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import kopf
import pytest

from helmr.operator import handlers
from helmr.operator.handler_logs import KOPF_OBJECTS, WatchSuccesses


@pytest.fixture
def filtered(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    quiet = WatchSuccesses(handlers.session_deleted, handlers.actor_seen, handlers.runner_pod_event)
    KOPF_OBJECTS.addFilter(quiet)
    caplog.set_level(logging.INFO, logger=KOPF_OBJECTS.name)
    try:
        yield caplog
    finally:
        KOPF_OBJECTS.removeFilter(quiet)


def test_every_watch_handlers_success_line_is_dropped(filtered: pytest.LogCaptureFixture) -> None:
    # The handlers as kopf registered them, and its line (kopf._core.actions.execution).
    watching = kopf.get_default_registry()._watching.get_all_handlers()
    assert {handler.id for handler in watching} == {
        "session_deleted",
        "actor_seen",
        "runner_pod_event",
    }
    for handler in watching:
        KOPF_OBJECTS.info(f"{handler} succeeded.")

    assert filtered.records == []


def test_failures_and_other_handlers_lines_are_kept(filtered: pytest.LogCaptureFixture) -> None:
    kept = [
        "Handler 'session_deleted' failed with an exception and will try again in 60 seconds: x",
        "Handler 'session_admit' succeeded.",
        "Creation is processed: 1 succeeded; 0 failed.",
    ]
    for line in kept:
        KOPF_OBJECTS.info(line)

    assert [record.getMessage() for record in filtered.records] == kept
