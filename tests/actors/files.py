"""A test actor that writes and reads files on the Computer disk.

Its entrypoint is ``files:files`` (``tests/actors`` on ``PYTHONPATH``, as in the
local runner image). An input object may hold, done in this order:

- ``{"write": {"name": "text", ...}}``: writes each file under ``HELMR_COMPUTER_DIR``
  (flushed and fsynced before the turn completes, as 000 asks of handlers);
- ``{"fill": {"name": bytes, ...}}``: writes each file with that many random
  bytes (incompressible, as a disk's worst case), streamed in chunks so a runner
  with a small memory limit can fill gigabytes, and fsynced likewise; with
  ``"sync": false`` beside it, not fsynced at the end (left to the kernel's
  writeback, or to the save's cut: what benchmarks/bench_computer.py's
  ``--unsynced`` measures);
- ``{"read": ["name", ...]}``: the result's ``read`` maps each name to its text,
  or null when the file is missing;
- ``{"size": ["name", ...]}``: the result also has ``size``, mapping each name
  to its size in bytes, or null when the file is missing;
- ``{"remove": ["name", ...]}``: deletes each file, if it is there (after the
  writes and fills, before the reads);
- ``{"sleep": seconds}``: sleeps before completing, cancellable (the turn stays
  running, for tests that lose its runner mid-turn).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import JsonValue

from helmr.protocol.contract import ENV_COMPUTER_DIR
from helmr.runner import Session, Turn, actor


async def run(session: Session) -> None:
    while (turn := await session.receive()) is not None:
        await turn.complete(await files_turn(turn))


async def files_turn(turn: Turn) -> JsonValue:
    computer = Path(os.environ[ENV_COMPUTER_DIR])
    asked = turn.input if isinstance(turn.input, dict) else {}
    written = asked.get("write")
    for name, text in (written if isinstance(written, dict) else {}).items():
        _write(computer / name, str(text))
    filled = asked.get("fill")
    sync = asked.get("sync") is not False
    for name, size in (filled if isinstance(filled, dict) else {}).items():
        # In a thread: the runner's event loop keeps serving while gigabytes go to disk.
        await asyncio.to_thread(_fill, computer / name, int(str(size)), sync)
    removed = asked.get("remove")
    for name in removed if isinstance(removed, list) else []:
        (computer / str(name)).unlink(missing_ok=True)
    names = asked.get("read")
    read: dict[str, JsonValue] = {
        str(name): _read(computer / str(name))
        for name in (names if isinstance(names, list) else [])
    }
    result: dict[str, JsonValue] = {"read": read}
    sized = asked.get("size")
    if isinstance(sized, list):
        result["size"] = {str(name): _size(computer / str(name)) for name in sized}
    if "sleep" in asked:
        await asyncio.sleep(float(str(asked["sleep"])))
    return result


def _write(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


FILL_CHUNK = 1 << 20
FILL_SYNC_EVERY = 64
"""Chunks between fsyncs while filling: dirty pages count against the runner's
memory limit, so they are written back before they pile up (unsynced: never,
the kernel's writeback and the cgroup's dirty-page throttling decide)."""


def _fill(path: Path, size: int, sync: bool) -> None:
    with path.open("wb") as file:
        for done in range(0, size, FILL_CHUNK):
            file.write(os.urandom(min(FILL_CHUNK, size - done)))
            if sync and (done // FILL_CHUNK) % FILL_SYNC_EVERY == FILL_SYNC_EVERY - 1:
                os.fsync(file.fileno())
        if sync:
            os.fsync(file.fileno())


def _size(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


files = actor(id="files", run=run)
