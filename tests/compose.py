"""Helmr's control plane without Kubernetes, for the unit tests and the benchmarks.

What the operator puts together in a cluster (``helmr.operator.control_plane``):
a :class:`~helmr.store.Store` (either backend), the :class:`~helmr.control.Control` over
it, and the REST app (``build_app``), here with static tokens in place of the
apiserver's reviews and an optional clock that moves only when a test moves it.

It lives beside the tests rather than in the ``helmr`` package: the package's
one composition is the operator's (the server may not import the store), and
the benchmarks run from a checkout, where they import ``tests`` as they
already do for the cluster helpers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web

from helmr.control import ControlConfig
from helmr.control.control import Control
from helmr.protocol.api_routes import STREAM_KEEPALIVE
from helmr.server import (
    Grant,
    Mirror,
    RunnerTokenVerifier,
    SessionNames,
    StaticAuthenticator,
    StaticRunnerTokens,
    app_runner,
    build_app,
    listen,
)
from helmr.server.workspaces import WorkspaceDeleter
from helmr.store import Store, sessions, utc_now


class Clock:
    """The store's clock: it moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now


@dataclass(frozen=True)
class Plane:
    """A store and the Control over it."""

    store: Store
    control: Control


@asynccontextmanager
async def open_plane(
    location: str | Path,
    *,
    clock: Clock | None = None,
    config: ControlConfig | None = None,
    retention: timedelta | None = None,
) -> AsyncIterator[Plane]:
    """The store at ``location`` (a SQLite file or a ``postgresql://`` URL; created if
    new) and a Control over it; closes the store after."""
    async with await Store.open(location, clock=clock or utc_now, retention=retention) as store:
        yield Plane(store, Control(store, config))


def static_app(
    control: Control,
    grants: Mapping[str, Grant],
    runner_tokens: RunnerTokenVerifier | None = None,
    *,
    mirror: Mirror | None = None,
    workspaces: WorkspaceDeleter | None = None,
    keepalive: float = STREAM_KEEPALIVE,
    session_names: SessionNames | None = None,
) -> web.Application:
    """The REST app over ``control``: bearer tokens from ``grants``, runner tokens
    from ``runner_tokens`` (none if omitted); ``session_names`` as the control plane
    keeps them (loaded before it listens), or each read as first asked for."""
    return build_app(
        control,
        StaticAuthenticator(grants),
        runner_tokens if runner_tokens is not None else StaticRunnerTokens(),
        mirror=mirror,
        workspaces=workspaces,
        keepalive=keepalive,
        session_names=session_names,
    )


@asynccontextmanager
async def serving(
    app: web.Application, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serves ``app`` over TCP (port 0 picks a free one) as the control plane does
    (``app_runner``); yields its base URL."""
    runner = app_runner(app)
    await runner.setup()
    try:
        await listen(runner, host, port)
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        await runner.cleanup()


async def new_session(store: Store, name: str = "w", namespace: str = "team") -> str:
    """A Session row written straight to the store (no Control): named ``name``,
    on the Workspace ``name``; its id."""
    row = await store.write(
        lambda tx: sessions.insert(
            tx,
            namespace=namespace,
            name=name,
            actor="a",
            workspace=name,
            key=None,
            idempotency_key=None,
        )
    )
    return row.id
