"""SIGKILL the API mid-load: after a restart, every acknowledged write is there.

The API runs as a real subprocess (``api_process.py``) over a SQLite
store. Writers enqueue turns (public API) and append output (runner API)
concurrently; the process is killed while requests are in flight. A write the
server answered 200 must survive; one in flight may or may not, but the
timeline must never have a gap or a repeat.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from helmr.protocol import EPOCH_HEADER
from tests.compose import open_plane

REPO = Path(__file__).resolve().parents[3]
SERVER = "tests.unit.server.api_process"
TOKEN = "admin"
RUNNER_TOKEN = "runner"
WRITERS = 8
KILL_AFTER = 300  # acknowledged writes before the kill


@asynccontextmanager
async def api_process(
    db: str | Path, session_id: str
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        SERVER,
        "--db",
        str(db),
        "--port",
        "0",
        "--token",
        TOKEN,
        "--runner-token",
        f"{session_id}={RUNNER_TOKEN}",
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stderr is not None
    line = (await process.stderr.readline()).decode()
    found = re.search(r"listening on (\S+)", line)
    assert found, line
    try:
        yield found.group(1), process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


@dataclass
class Acknowledged:
    turns: set[str] = field(default_factory=set)
    outputs: set[str] = field(default_factory=set)

    def __len__(self) -> int:
        return len(self.turns) + len(self.outputs)


async def _writer(
    http: aiohttp.ClientSession,
    url: str,
    sid: str,
    epoch: int,
    n: int,
    acked: Acknowledged,
    enough: asyncio.Event,
) -> None:
    public = {"Authorization": f"Bearer {TOKEN}"}
    runner = {"Authorization": f"Bearer {RUNNER_TOKEN}", EPOCH_HEADER: str(epoch)}
    for i in itertools.count():
        key = f"w{n}-{i}"
        try:
            if i % 2:
                async with http.post(
                    f"{url}/v1/sessions/{sid}/turns",
                    headers=public,
                    json={"input": key, "idempotency_key": key},
                ) as r:
                    assert r.status == 200, await r.text()
                    acked.turns.add((await r.json())["id"])
            else:
                async with http.post(
                    f"{url}/runner/v1/sessions/{sid}/output",
                    headers=runner,
                    json={"value": key, "idempotency_key": key},
                ) as r:
                    assert r.status == 200, await r.text()
                    acked.outputs.add(key)
        except (TimeoutError, aiohttp.ClientError):
            return  # the server is gone: this write was never acknowledged
        if len(acked) >= KILL_AFTER:
            enough.set()


async def _timeline(url: str, sid: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        while True:
            after = records[-1]["sequence"] if records else 0
            async with http.get(
                f"{url}/v1/sessions/{sid}/events", params={"after": str(after), "limit": "1000"}
            ) as r:
                page = await r.json()
            records += page["records"]
            if not page["has_more"]:
                return records


async def test_sigkill_mid_load_loses_no_acknowledged_event(store_location: str | Path) -> None:
    db = store_location
    async with open_plane(db) as plane:
        session = await plane.control.open_session(
            namespace="team-a", name="load", actor="reviewer", workspace="ws"
        )
        epoch = await plane.control.process_started(session.id)
    sid = session.id

    acked = Acknowledged()
    async with api_process(db, sid) as (url, process):
        enough = asyncio.Event()
        async with aiohttp.ClientSession() as http:
            writers = [
                asyncio.create_task(_writer(http, url, sid, epoch, n, acked, enough))
                for n in range(WRITERS)
            ]
            await enough.wait()
            os.kill(process.pid, signal.SIGKILL)  # mid-load: writers are still sending
            await asyncio.gather(*writers)
        assert await process.wait() == -signal.SIGKILL
    assert len(acked) >= KILL_AFTER

    async with api_process(db, sid) as (url, _):
        records = await _timeline(url, sid)
        # No gap and no repeat, in-flight writes included.
        assert [r["sequence"] for r in records] == list(range(1, len(records) + 1))
        queued = {r["turn_id"] for r in records if r["kind"] == "turn.queued"}
        written = {r["data"][0]["text"] for r in records if r["kind"] == "turn.output"}
        assert acked.turns <= queued
        assert acked.outputs <= written
        # Idempotency survived the crash too: repeating an acknowledged write adds nothing.
        key = sorted(acked.outputs)[0]
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{url}/runner/v1/sessions/{sid}/output",
                headers={"Authorization": f"Bearer {RUNNER_TOKEN}", EPOCH_HEADER: str(epoch)},
                json={"value": key, "idempotency_key": key},
            ) as r,
        ):
            assert r.status == 200
        assert len(await _timeline(url, sid)) == len(records)
