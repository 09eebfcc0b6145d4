"""A throwaway PostgreSQL server from Debian's packages, for the tests and benchmarks.

``initdb`` into a temporary directory, ``pg_ctl start`` on a free loopback
port with the socket in that directory, ``pg_ctl stop`` and the directory
removed afterwards. PostgreSQL refuses to run as root, so as root (CI) the
directory is given to the ``postgres`` user and the programs run as it.

Each test gets its own database, created from a template that already has
the store's schema (a file copy: milliseconds), and dropped after it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from helmr.store import Store

USER = "helmr"
TEMPLATE = "helmr_template"
DEBIAN_BINARIES = Path("/usr/lib/postgresql")

# For tests: durability off (the server's files are thrown away), connections
# for several stores at once (each pools 8, and listens on one more).
FAST = ("-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
CONNECTIONS = "-c max_connections=200"


def find_binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian's layout), if any."""
    found = sorted(
        DEBIAN_BINARIES.glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name), reverse=True
    )
    return found[0].parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    directory: Path
    port: int
    binaries: Path
    options: str
    """The server's command-line options, for starting it again after :meth:`halt`."""
    _names: Iterator[int] = field(default_factory=itertools.count)

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    @contextmanager
    def database(self, *, migrated: bool = True) -> Iterator[str]:
        """A new database's URL (with the store's schema unless ``migrated`` is
        false: then empty); dropped afterwards."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        template = TEMPLATE if migrated else "template0"
        with self._admin() as admin:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        try:
            yield self.url(name)
        finally:
            with self._admin() as admin:
                admin.execute(f"DROP DATABASE {name} WITH (FORCE)")

    def prepare_template(self) -> None:
        """The template each migrated test database is copied from."""
        with self._admin() as admin:
            admin.execute(f"CREATE DATABASE {TEMPLATE}")
        asyncio.run(_migrate(self.url(TEMPLATE)))
        # Copying a database needs it to have no connection, and a closed pool's
        # backends exit after it returns: on a loaded machine, one outlived the
        # 5 s CREATE DATABASE waits for them ("source database is being accessed
        # by other users"). None may connect to the template from now on.
        with self._admin() as admin:
            admin.execute(f"ALTER DATABASE {TEMPLATE} WITH ALLOW_CONNECTIONS false")
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (TEMPLATE,),
            )

    def restart(self, mode: str = "fast") -> None:
        """Stops the server (closing every connection) and starts it again with the
        same options (pg_ctl keeps them), on the same port. ``mode`` is pg_ctl's:
        ``fast`` shuts down cleanly, ``immediate`` crashes (recovery at start)."""
        data, log = str(self.directory / "data"), str(self.directory / "server.log")
        _run(self.binaries / "pg_ctl", "-D", data, "-l", log, "-m", mode, "-w", "restart")

    def halt(self, mode: str = "fast") -> None:
        """Stops the server, keeping its files, until :meth:`resume`."""
        _run(self.binaries / "pg_ctl", "-D", str(self.directory / "data"), "-m", mode, "stop")

    def resume(self) -> None:
        """Starts the server (again, after :meth:`halt`) with its options."""
        data, log = self.directory / "data", self.directory / "server.log"
        try:
            _run(
                self.binaries / "pg_ctl",
                "-D",
                str(data),
                "-o",
                self.options,
                "-l",
                str(log),
                "-w",
                "start",
            )
        except subprocess.CalledProcessError:
            log_text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start:\n{log_text}") from None

    def stop(self) -> None:
        _run(self.binaries / "pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)

    @contextmanager
    def _admin(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            yield conn


async def _migrate(url: str) -> None:
    async with await Store.open(url):
        pass


def start(
    binaries: Path, *, durable: bool = False, also_listen: str | None = None
) -> PostgresServer:
    """A new server: ``durable`` keeps PostgreSQL's defaults (fsync on every
    commit), for figures; otherwise it runs without durability, for tests.
    ``also_listen``: another address of this host to serve on (the cluster's node
    IP, for pods), trusting clients on the networks this host is attached to."""
    directory = Path(tempfile.mkdtemp(prefix="helmr-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
    port = _free_port()
    data = directory / "data"
    _run(binaries / "initdb", "-D", str(data), "-A", "trust", "-U", USER, "-E", "UTF8", "--no-sync")
    if also_listen is not None:
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all samenet trust\n")
    listen = ",".join(["127.0.0.1", *([also_listen] if also_listen else [])])
    options = [f"-p {port}", f"-k {directory}", f"-c listen_addresses={listen}", CONNECTIONS]
    if not durable:
        options += FAST
    server = PostgresServer(directory, port, binaries, " ".join(options))
    try:
        server.resume()
    except RuntimeError:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return server


def _run(program: Path, *args: str) -> None:
    """Runs a PostgreSQL program, as the postgres user when this is root."""
    command = [str(program), *args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, capture_output=True, text=True)
