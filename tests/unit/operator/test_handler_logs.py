"""kopf's routine success lines are dropped, as kopf writes them, and nothing else of
kopf's: not a failure or retry, nor the one summary of a creation or update. What
the event loop reports (an exception no code caught) is logged, though kopf's setup
drops it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import kopf
import pytest

from helmr.operator.kopf import handlers
from helmr.operator.kopf.handler_logs import KOPF_OBJECTS, LOOP, RoutineSuccesses, hear_the_loop
from tests.unit.loops import BOTH


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


class _RefusesEveryConnection(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()  # uvloop leaves it open otherwise: a ResourceWarning
        raise RuntimeError("a bug in connection_made")


async def _connect_to_a_failing_protocol() -> None:
    server = await asyncio.get_running_loop().create_server(_RefusesEveryConnection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(10):
            # The server's close: after its loop reported the exception, which it
            # does as the callback raises, before the transport's close is carried out.
            await reader.read()
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kopf_logging() -> Iterator[_Collected]:
    """kopf's logging setup as ``kopf run`` makes it, at DEBUG, with a handler of the
    root logger's (as the process's log is) collecting what reaches it; undone after."""
    root = logging.getLogger()
    kept = (root.handlers[:], root.level, LOOP.handlers[:], LOOP.propagate, LOOP.level)
    kopf.configure(verbose=True)
    collected = _Collected()
    root.addHandler(collected)
    try:
        yield collected
    finally:
        root.handlers[:], root.level = kept[0], kept[1]
        LOOP.handlers[:], LOOP.propagate, LOOP.level = kept[2], kept[3], kept[4]


@pytest.mark.parametrize("loop", BOTH)
def test_what_no_code_caught_on_the_event_loop_reaches_the_log_despite_kopfs_setup(
    loop: str, kopf_logging: _Collected
) -> None:
    hear_the_loop()
    event_loop = BOTH[loop]()
    try:
        event_loop.run_until_complete(_connect_to_a_failing_protocol())
    finally:
        event_loop.close()

    [report] = [record for record in kopf_logging.records if record.name == LOOP.name]
    assert report.levelno == logging.ERROR
    assert report.exc_info is not None
    assert str(report.exc_info[1]) == "a bug in connection_made"


def test_the_event_loops_debug_lines_stay_out(kopf_logging: _Collected) -> None:
    hear_the_loop()
    LOOP.debug("Using selector: EpollSelector")
    LOOP.info("poll took 1.2 ms")
    LOOP.warning("Executing <Task ...> took 0.2 seconds")

    assert [record.getMessage() for record in kopf_logging.records] == [
        "Executing <Task ...> took 0.2 seconds"
    ]
