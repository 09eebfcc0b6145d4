"""What every command shares: settings, running a client call, errors, JSON arguments.

Exit codes: 0 done, 1 the API refused (the message says what to do), 2 bad
usage, 3 the API cannot be reached, 124 ``turn wait`` timed out (the turn goes on).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import aiohttp
import click
from pydantic import BaseModel, JsonValue

from helmr.cli import render
from helmr.client import Client
from helmr.errors import HelmrError

API_ERROR, UNREACHABLE, TIMED_OUT = 1, 3, 124

# What to do next, by error code; the server's message says what went wrong.
HINTS = {
    "unauthenticated": "set HELMR_TOKEN (or --token) to a valid Kubernetes token, "
    "e.g. `kubectl create token <serviceaccount>`",
    "forbidden": "ask for a Role granting that verb on that helmr.dev resource in the namespace",
    "not_found": "check the ids: `helmr session get SESSION` shows the session",
    "session_held": "resume it first: `helmr session get SESSION` shows the hold id, then "
    "`helmr session resume SESSION --hold-id HOLD`",
    "session_not_open": "this session takes no more work; start a new one",
    "turn_not_active": "that turn is not running; `helmr session send SESSION DATA` reaches "
    "the active turn or enqueues",
    "turn_settling": "the turn is settling; wait for it with `helmr session turn wait`",
    "hold_mismatch": "`helmr session get SESSION` shows the current hold id",
    "queue_full": "the session holds its Actor's queueLimit of queued turns; enqueue again "
    "once some have started (`helmr session get SESSION` shows the queue)",
}


@dataclass(frozen=True)
class Settings:
    url: str | None
    token: str | None
    json: bool
    # Another way to a client, used instead of url and token: the kubectl
    # plugin's (helmr.kubectl), which finds the API from a kubeconfig.
    connect: Callable[[], Client] | None = None


def client_of(settings: Settings) -> Client:
    if settings.connect is not None:
        return settings.connect()
    if not settings.url:
        raise click.UsageError(
            "give the Helmr API URL: --url or HELMR_URL (or use `kubectl helmr`, "
            "which finds it from your kubeconfig)"
        )
    return Client(settings.url, settings.token)


def fail(message: str, hint: str | None, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def run(ctx: click.Context, work: Callable[[Client], Awaitable[int | None]]) -> None:
    """Runs ``work`` with a client; maps every failure to a message and an exit code."""
    client = client_of(settings_of(ctx))

    async def main() -> int | None:
        async with client:
            return await work(client)

    try:
        code = asyncio.run(main())
    except HelmrError as e:
        fail(f"{e.code}: {e.message}", HINTS.get(e.code), API_ERROR)
    except (aiohttp.ClientError, TimeoutError) as e:
        fail(
            f"cannot reach the Helmr API at {client.base_url}: {e or type(e).__name__}",
            "check --url / HELMR_URL and that the server is up",
            UNREACHABLE,
        )
    except KeyboardInterrupt:
        sys.exit(130)  # stops watching; the session is not touched
    if code:
        sys.exit(code)


def parse_json(ctx: click.Context, param: click.Parameter, value: str) -> JsonValue:
    """A JSON argument; ``-`` reads it from stdin."""
    text = sys.stdin.read() if value == "-" else value
    try:
        parsed: JsonValue = json.loads(text)
    except ValueError as e:
        raise click.BadParameter(
            f"must be JSON ({e}); quote strings, e.g. '\"text\"' or '{{\"issue\": 42}}'"
        ) from None
    return parsed


def settings_of(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


V = TypeVar("V", bound=BaseModel)


def show(ctx: click.Context, view: V, human: Callable[[V], None]) -> None:
    """Prints ``view``: as JSON with ``--json``, else with ``human``."""
    if settings_of(ctx).json:
        render.emit_json(view)
    else:
        human(view)
