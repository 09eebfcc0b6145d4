"""The timeline stores ``bench_scale.py`` measures on: a SQLite file in a new
directory, or a new database on a PostgreSQL server started for the run."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
