"""No acknowledged write is lost when the process is SIGKILLed mid-load.

The writer runs in a child process (this module run by ``python -m``): four tasks
append events as fast as they can and print each one once its write is
acknowledged. The test kills the child with SIGKILL while it is writing,
reopens the database and looks for every acknowledged event. On PostgreSQL
the server outlives the client, and the test server runs without fsync: this
proves that the store acknowledges only committed writes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from helmr.events import EventKind
from helmr.store import Store
from helmr.store.store import is_postgres
from tests.compose import new_session

ACKS_BEFORE_KILL = 3000
REPO = Path(__file__).resolve().parents[3]


async def _write_until_killed(location: str | Path) -> None:
    async with await Store.open(location) as store:
        session_id = await new_session(store, "durable")
        print(f"session {session_id}", flush=True)

        async def writer(number: int) -> None:
            while True:
                event = await store.append_event(session_id, EventKind.TURN_OUTPUT, number)
                print(f"ack {event.sequence} {event.id}", flush=True)

        await asyncio.gather(*(writer(n) for n in range(4)))


def _acknowledged(lines: list[str]) -> dict[int, str]:
    acks = {}
    for line in lines:
        if line.startswith("ack ") and line.endswith("\n"):  # a line cut by the kill is no ack
            _, sequence, event_id = line.split()
            acks[int(sequence)] = event_id
    return acks


def _kill_mid_load(location: str | Path) -> tuple[str, dict[int, str]]:
    """Runs the writer, SIGKILLs it after enough acks; returns its session and acks."""
    with subprocess.Popen(
        [sys.executable, "-m", __name__, str(location)], stdout=subprocess.PIPE, text=True, cwd=REPO
    ) as child:
        assert child.stdout is not None
        lines = [child.stdout.readline()]
        while len(lines) <= ACKS_BEFORE_KILL:
            line = child.stdout.readline()
            assert line, f"the writer ended early with {child.poll()}"
            lines.append(line)
        os.kill(child.pid, signal.SIGKILL)
        lines.extend(child.stdout.readlines())  # printed before the kill: acknowledged too
        assert child.wait() == -signal.SIGKILL
    return lines[0].split()[1], _acknowledged(lines)


async def _stored(location: str | Path, session_id: str) -> dict[int, str]:
    stored: dict[int, str] = {}
    async with await Store.open(location) as store:
        after = 0
        while True:
            page = await store.page(session_id, after, 1000)
            stored.update((event.sequence, event.id) for event in page.records)
            after = page.next_after
            if not page.has_more:
                return stored


def test_sigkill_loses_no_acknowledged_event(store_location: str | Path) -> None:
    session_id, acks = _kill_mid_load(store_location)
    assert len(acks) >= ACKS_BEFORE_KILL
    stored = asyncio.run(_stored(store_location, session_id))
    assert list(stored) == list(range(1, len(stored) + 1))
    missing = {seq: event_id for seq, event_id in acks.items() if stored.get(seq) != event_id}
    assert missing == {}


if __name__ == "__main__":
    location = sys.argv[1]
    asyncio.run(_write_until_killed(location if is_postgres(location) else Path(location)))
