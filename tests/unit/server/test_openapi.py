"""The OpenAPI document: it matches the served routes, and the API survives a fuzzer."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.unit.api import (
    ADMIN,
    Api,
)

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
ROOT = Path(__file__).parents[3]


async def test_every_route_is_documented_and_every_documented_route_is_served(api: Api) -> None:
    routes = api.app.router.routes()
    served = {(r.method.lower(), r.resource.canonical) for r in routes if r.resource}
    doc = await api.call("GET", "/openapi.json", token="")
    documented = {(method, path) for path, item in doc["paths"].items() for method in item}
    assert served == documented
    assert len(served) == 37


async def test_document_names_parameters_bodies_and_errors(api: Api) -> None:
    doc = await api.call("GET", "/openapi.json", token="")
    assert doc["openapi"] == "3.1.0"
    events = doc["paths"]["/v1/sessions/{session_id}/events"]["get"]
    params = {p["name"]: p for p in events["parameters"]}
    assert params["after"]["schema"]["maximum"] == 2**53 - 1
    assert (params["limit"]["schema"]["minimum"], params["limit"]["schema"]["maximum"]) == (1, 1000)
    assert events["x-kubernetes-verb"] == "get"
    assert events["security"] == [{"kubernetes": []}]
    assert {"400", "401", "403", "404"} <= set(events["responses"])
    enqueue = doc["paths"]["/v1/sessions/{session_id}/turns"]["post"]
    assert enqueue["requestBody"]["required"] is True
    assert {"409", "413", "415"} <= set(enqueue["responses"])
    receive = doc["paths"]["/runner/v1/sessions/{session_id}/receive"]["post"]
    assert "Helmr-Process-Epoch" in {p["name"] for p in receive["parameters"]}
    assert "408" in receive["responses"]
    stream = doc["paths"]["/v1/sessions/{session_id}/events/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    frame = stream["responses"]["200"]["content"]["text/event-stream"]["schema"]["properties"]
    assert frame["event"]["enum"] == ["message", "retention", "end"]
    data = [ref["$ref"].rsplit("/", 1)[-1] for ref in frame["data"]["contentSchema"]["anyOf"]]
    assert data == ["SessionEvent", "RetentionBoundary", "StreamEnd"]


async def _schemathesis(
    api: Api, cwd: Path, *options: str, env: dict[str, str] | None = None
) -> None:
    """Fuzzes every operation (bounded) against the live app on loopback.

    The long polls are left out: a valid request to them waits by design
    (up to 300 s), which a fuzzer reads as a hung server; their inputs are
    covered by test_server_errors.
    """
    process = await asyncio.create_subprocess_exec(
        str(SCHEMATHESIS),
        "run",
        f"{api.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {ADMIN}",
        *options,
        "--exclude-operation-id",
        "wait_turn",
        "--exclude-operation-id",
        "stream_events",
        "--max-examples",
        "5",
        "--seed",
        "20261130",
        "--workers",
        "1",
        "--request-timeout",
        "30",
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    # Awaited, not run blocking: the app under test is served by this loop.
    output, _ = await process.communicate()
    report = output.decode()
    assert process.returncode == 0, report
    assert " passed" in report


# A fuzz run's work is bounded by the example count, not by time: a separate
# fuzzer process (seconds to import) sends a few hundred requests, 8 to 11 s alone
# on 2 cores and three times that beside other test runs; 30 s is the budget of
# one in-process test, so it gets more, still far below a hang's 600.
FUZZ_TIMEOUT = 120


@pytest.mark.timeout(FUZZ_TIMEOUT)
async def test_schemathesis_finds_no_server_error(api: Api, tmp_path: Path) -> None:
    await _schemathesis(api, tmp_path, "--checks", "all")


@pytest.mark.timeout(FUZZ_TIMEOUT)
async def test_schemathesis_bodies_with_lone_surrogates_are_refused(
    api: Api, tmp_path: Path
) -> None:
    """Every body drawn holds a lone UTF-16 surrogate (tests/unit/server/lone_surrogates.py),
    which the store cannot write: each is refused with a 4xx. Paths name a real Session
    with a running Turn, kept open: the operations that would end either are left out."""
    sid = await api.start()
    await api.enqueue(sid)
    tid, _ = await api.run_turn(sid)
    left_out = ("cancel", "close", "interrupt", "interrupt_turn")
    await _schemathesis(
        api,
        tmp_path,
        "--checks",
        "not_a_server_error,lone_surrogate_refused",
        "--mode",
        "positive",
        "--phases",
        "fuzzing",
        *(f"--exclude-operation-id={operation}" for operation in left_out),
        env={
            "SCHEMATHESIS_HOOKS": "tests.unit.server.lone_surrogates",
            "PYTHONPATH": str(ROOT),
            "HELMR_FUZZ_SESSION": sid,
            "HELMR_FUZZ_TURN": tid,
        },
    )
