"""The timeline stores ``bench_scale.py`` measures on: a SQLite file in a new
directory, or a new database on a PostgreSQL server started for the run; and the
rows of its table, one per store and count of Sessions."""

from __future__ import annotations

import argparse
import os
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import Table
from tests import postgres


@contextmanager
def stores(kinds: list[str]) -> Iterator[Iterator[tuple[str, Any]]]:
    """Each kind's store factory: a context giving a new store's location."""
    server = None
    if "postgres" in kinds:
        binaries = postgres.find_binaries()
        if binaries is None:
            raise SystemExit("PostgreSQL is not installed (hack/install-deps.sh)")
        server = postgres.start(binaries, durable=True)
    try:

        @contextmanager
        def sqlite() -> Iterator[str]:
            directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"helmr-scale-{uuid.uuid4().hex}"
            directory.mkdir()
            try:
                yield str(directory / "helmr.db")
            finally:
                subprocess.run(["rm", "-rf", str(directory)], check=False)

        def postgresql() -> Any:
            assert server is not None
            return server.database(migrated=False)

        factories = {"sqlite": sqlite, "postgres": postgresql}
        yield ((kind, factories[kind]) for kind in kinds)
    finally:
        if server is not None:
            server.stop()


async def each_row(
    args: argparse.Namespace, table: Table, row: Callable[[str, str, int], Awaitable[None]]
) -> None:
    """``row(kind, store, sessions)`` for each store kind in ``--store`` and each count in
    ``--sessions``, every one on a new store; the table so far is printed after each
    (a later row may take long, or fail), and whole at the end."""
    with stores(args.store.split(",")) as factories:
        for kind, factory in factories:
            for sessions in (int(n) for n in args.sessions.split(",")):
                with factory() as store:
                    await row(kind, store, sessions)
                table.print()
    print()
    print(
        f"api turn resources: {'on' if args.api_turn_resources else 'off'};"
        f" {args.seconds:.0f} s of load per row; {os.cpu_count()} cores"
    )
    table.print()
