"""kopf's own lines, once the startup handler formats the process's logs (helmr.logs)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import kopf
import pytest

from helmr import logs


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    # kopf.configure changes the root logger and silences asyncio's: both are put back.
    root, quiet = logging.getLogger(), logging.getLogger("asyncio")
    kept = root.handlers[:], root.level, quiet.handlers[:], quiet.propagate
    try:
        yield root
    finally:
        root.handlers[:], level, quiet.handlers[:], quiet.propagate = kept
        root.setLevel(level)


def test_kopfs_lines_come_out_in_helmrs_json(root: logging.Logger) -> None:
    # What `kopf run --log-format full` sets up (pytest's own handlers set aside),
    # then what operator_startup does.
    root.handlers[:] = []
    kopf.configure(log_format=kopf.LogFormat.FULL)
    (kopfs,) = root.handlers
    assert isinstance(kopfs, logging.StreamHandler)
    stream = io.StringIO()
    kopfs.setStream(stream)
    logs.configure("json")
    body = kopf.Body(
        {
            "apiVersion": "helmr.dev/v1alpha1",
            "kind": "Session",
            "metadata": {"name": "review", "namespace": "team-a", "uid": "u1"},
        }
    )
    with logs.bound(session="ses_1"):
        kopf.LocalObjectLogger(body=body, settings=kopf.OperatorSettings()).info("handled")
    logging.getLogger("kopf.reactor.running").warning("starting")

    handled, starting = (json.loads(line) for line in stream.getvalue().splitlines())
    assert handled == {
        "time": handled["time"],
        "level": "info",
        "logger": "kopf.objects",
        "message": "handled",
        "namespace": "team-a",
        "session": "ses_1",
        "object": "Session/review",
    }
    assert (starting["logger"], starting["message"]) == ("kopf.reactor.running", "starting")
