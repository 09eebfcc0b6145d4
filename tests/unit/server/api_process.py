"""The API as a standalone process, for test_kill (no tests here).

``python -m tests.unit.server.api_process --db PATH|URL --token T``, run from the
repository, serves the same app as the operator over a store (either backend), with
static tokens instead of Kubernetes (``tests.compose``). It lives with the
tests because the server package may not import the store
(docs/architecture.md); the operator is what wires them in a cluster.
Prints ``listening on <url>`` once it accepts connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import click
import uvloop

from helmr.server import Grant, StaticRunnerTokens, User
from helmr.store.store import is_postgres
from tests.compose import open_plane, serving, static_app


async def serve(
    db: str | Path, host: str, port: int, token: str, runner_tokens: dict[str, str]
) -> None:
    async with open_plane(db) as plane:
        grants = {token: Grant(User("dev"))}
        app = static_app(plane.control, grants, StaticRunnerTokens(runner_tokens))
        async with serving(app, host, port) as url:
            stop = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            click.echo(f"listening on {url}", err=True)
            with contextlib.suppress(asyncio.CancelledError):
                await stop.wait()


def _pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for value in values:
        session_id, sep, token = value.partition("=")
        if not sep or not session_id or not token:
            raise click.BadParameter(f"{value!r} is not SESSION_ID=TOKEN")
        pairs[session_id] = token
    return pairs


@click.command()
@click.option(
    "--db",
    required=True,
    help="The timeline store: a SQLite file (created if new) or a postgresql:// URL.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True, help="0 picks a free port.")
@click.option(
    "--token",
    envvar="HELMR_TOKEN",
    required=True,
    help="The one bearer token the public API accepts (any namespace, any verb).",
)
@click.option(
    "--runner-token",
    "runner_tokens",
    multiple=True,
    callback=_pairs,
    help="SESSION_ID=TOKEN: a runner token for one session (repeatable).",
)
def main(db: str, host: str, port: int, token: str, runner_tokens: dict[str, str]) -> None:
    location = db if is_postgres(db) else Path(db)
    # The operator's loop (`kopf run` takes uvloop), so a kill here is one there.
    uvloop.run(serve(location, host, port, token, runner_tokens))


if __name__ == "__main__":
    main()
