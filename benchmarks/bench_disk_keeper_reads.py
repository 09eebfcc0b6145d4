"""What the disk keeper's reads of the saves to step cost, per store, as pending saves
gather (issue 31): under a save policy of one save per interval a Workspace gathers a
pending save with each Turn until the interval has passed.

    .venv/bin/python benchmarks/bench_disk_keeper_reads.py [--workspaces 5000]
        [--pending 20] [--woken 100] [--store sqlite,postgres] [--save-interval 3600]

Each store gets ``--workspaces`` Sessions, each on a Workspace of its own with
``--pending`` pending saves, then its statistics (``ANALYZE``, as PostgreSQL's autovacuum
and a long-lived SQLite file keep them). Printed per store, each read five times: the
wall time and this process's CPU time of a pass's read (every Workspace's: at most once
a reconcile interval), of a wake's (the Workspaces of ``--woken`` Sessions a change of
the store touched) and of one Session's, with the ratio of a pass's wall time to a
wake's. PostgreSQL's own CPU is in the wall time, not this process's.

``--save-interval``: the Workspaces' saves are cut at Turns' ends, at most one per that
many seconds, the last cut just now, and each Session's process is live: no newest
save is due, so the reads leave them out. Then also a take of one such save, which is
refused (what the keeper's step wrote at every Turn's end before its read left out
the saves not due): a write transaction, timed the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

# bench_scale.py's stores (a SQLite file in a new directory, or a new PostgreSQL
# database), which start the tests' PostgreSQL server: run from a checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _stores import stores

from helmr.control.disks import take_save
from helmr.store import ReadTx, Store, Tx, disks, sessions
from helmr.store.rows import SaveRow

READS = 5


def _fill(tx: Tx, workspaces: int, pending: int, interval: float | None) -> list[str]:
    """The Sessions, each on its Workspace with ``pending`` saves pending (under a save
    policy of one save per ``interval`` seconds, if given); their ids."""
    ids = [
        sessions.insert(
            tx,
            namespace="bench",
            name=f"s-{n}",
            actor="a",
            workspace=f"ws-{n}",
            key=None,
            idempotency_key=None,
        ).id
        for n in range(workspaces)
    ]
    for n, session_id in enumerate(ids):
        for _ in range(pending):
            disks.request_save(tx, "bench", f"ws-{n}", session_id, "turn")
        if interval is not None:
            gap = timedelta(seconds=interval)
            disks.set_policy(tx, "bench", f"ws-{n}", aligned=True, interval=gap)
            disks.set_cut(tx, "bench", f"ws-{n}")
            sessions.process_started(tx, session_id, 1, tx.now)
    return ids


async def _timed_take(store: Store, version: int) -> tuple[int, float, float]:
    """A take of save ``version`` of the first Workspace, refused (None: nothing
    written), as :func:`_timed` times a read."""

    def take(tx: Tx) -> None:
        assert take_save(tx, "bench", "ws-0", version) is None

    await store.write(take)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(READS):
        await store.write(take)
    return (
        0,
        (time.perf_counter() - wall) / READS * 1000,
        (time.process_time() - cpu) / READS * 1000,
    )


async def _timed(store: Store, read: Callable[[ReadTx], list[SaveRow]]) -> tuple[int, float, float]:
    """Rows read, and the wall and CPU milliseconds of one read (the mean of READS)."""
    await store.read(read)  # its statement prepared, its pages cached
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(READS):
        rows = len(await store.read(read))
    return (
        rows,
        (time.perf_counter() - wall) / READS * 1000,
        (time.process_time() - cpu) / READS * 1000,
    )


Row = tuple[str, str, str, str, str]
HEADER: Row = ("read", "rows", "wall ms", "CPU ms here", "pass / wake")


async def _rows(kind: str, location: str, args: argparse.Namespace) -> list[Row]:
    async with await Store.open(location) as store:
        ids = await store.write(
            lambda tx: _fill(tx, args.workspaces, args.pending, args.save_interval)
        )
        await store.write(lambda tx: tx.conn.execute("ANALYZE"))
        woken = set(ids[: args.woken])
        figures = {
            "a pass (every Workspace's)": await _timed(store, disks.to_step),
            f"a wake ({len(woken)} Sessions')": await _timed(
                store, lambda rt: disks.to_step(rt, woken)
            ),
            "one Session's": await _timed(store, lambda rt: disks.to_step(rt, {ids[0]})),
        }
        if args.save_interval is not None:
            figures["a take refused (a write)"] = await _timed_take(store, args.pending)
    pass_wall = next(iter(figures.values()))[1]
    return [
        (
            f"{kind}: {name}",
            str(rows),
            f"{wall:.1f}",
            f"{cpu:.1f}",
            f"{pass_wall / wall:.1f}x" if name.startswith("a wake") else "",
        )
        for name, (rows, wall, cpu) in figures.items()
    ]


async def main(args: argparse.Namespace) -> None:
    rows = [HEADER]
    with stores(args.store.split(",")) as factories:
        for kind, factory in factories:
            with factory() as location:
                rows += await _rows(kind, location, args)
    print(
        f"{args.workspaces} Workspaces x {args.pending} pending saves;"
        f" each read the mean of {READS}"
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=20)
    parser.add_argument("--woken", type=int, default=100)
    parser.add_argument("--store", default="sqlite,postgres")
    parser.add_argument(
        "--save-interval", type=float, help="seconds: saves under this policy, none due"
    )
    asyncio.run(main(parser.parse_args()))
