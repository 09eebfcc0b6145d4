"""``build_app``: the aiohttp application serving the public, runner and system routes."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client.registry import Collector

from helmr import __version__
from helmr.control.control import ApiControl
from helmr.errors import ErrorBody
from helmr.protocol.api_routes import STREAM_KEEPALIVE
from helmr.server.access import AccessGuard
from helmr.server.auth import Authenticator, RunnerTokenVerifier
from helmr.server.errors import CLIENT_LEFT, failure_response
from helmr.server.log_context import bind_request
from helmr.server.metrics import Metrics, nothing_to_refresh
from helmr.server.openapi import document
from helmr.server.public import Mirror, PublicApi
from helmr.server.routing import operations, register
from helmr.server.runner_api import Adoptions, RunnerApi, RunnerConnected, ignore_connection
from helmr.server.runner_server import RunnerServer
from helmr.server.session_names import SessionNames
from helmr.server.sse import Streams
from helmr.server.system import OPENAPI, SystemApi
from helmr.server.traces import TurnTraceFacts
from helmr.server.workspaces import WorkspaceApi, WorkspaceDeleter

MAX_BODY = 1 << 20

RUNNER_SERVER = web.AppKey("runner_server", RunnerServer)
"""The runner API alone, for a runner port of its own (``helmr.server.runner_server``)."""


async def _always_ready() -> bool:
    return True


def _always_leading() -> bool:
    return True


def _middleware(metrics: Metrics) -> Middleware:
    """Every request's one middleware: its log context bound, its failures answered as
    JSON (``errors.failure_response``), then its count and latency recorded with the
    status that answer has. One for the three, not a middleware each: each is a
    coroutine frame on every request, resumed at every wait of a held reply and kept
    by every waiting long poll (and aiohttp wraps any middlewares in one of its own)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        bind_request(request)  # so that the failure's log lines carry it too
        status = CLIENT_LEFT  # unless the handler ends: its client left, it was cancelled
        try:
            try:
                response = await handler(request)
            except Exception as error:
                answer = failure_response(request, error)
                if answer is None:
                    raise
                response = answer
            status = response.status
            return response
        except web.HTTPException as e:  # what is no failure (a redirect): aiohttp sends it
            status = e.status
            raise
        finally:
            metrics.observe(request, status, time.perf_counter() - started)

    return middleware


def build_app(
    control: ApiControl,
    authenticator: Authenticator,
    runner_tokens: RunnerTokenVerifier,
    *,
    mirror: Mirror | None = None,
    workspaces: WorkspaceDeleter | None = None,
    max_body: int = MAX_BODY,
    keepalive: float = STREAM_KEEPALIVE,
    collectors: Sequence[Collector] = (),
    refresh_metrics: Callable[[], Awaitable[None]] = nothing_to_refresh,
    runner_connected: RunnerConnected = ignore_connection,
    ready: Callable[[], Awaitable[bool]] = _always_ready,
    leading: Callable[[], bool] = _always_leading,
    traces: TurnTraceFacts | None = None,
    session_names: SessionNames | None = None,
    adoptions: Adoptions | None = None,
) -> web.Application:
    """The Helmr API over ``control``.

    ``authenticator`` checks public callers (``KubeAuthenticator`` in a cluster),
    ``runner_tokens`` the runners' per-session tokens; ``mirror`` creates the
    Kubernetes objects of sessions and turns admitted here, ``workspaces`` deletes
    a Workspace's object (its claims and saves go with it). ``max_body`` bounds
    request bodies (413 beyond it), ``keepalive`` is the SSE comment interval,
    ``collectors`` join the /metrics registry (e.g. turns by outcome),
    ``refresh_metrics`` runs before each scrape, ``runner_connected`` hears of
    each runner's ``receive``, ``ready`` answers /readyz (with ``leading``: whether
    this replica leads) and ``traces`` hears of
    admissions and settlements (the Turns' traces, when tracing is on).
    ``session_names`` are where the Sessions are, kept (shared with a runner
    token verifier that needs them; made here if not given). ``adoptions`` answers
    pooled runners' adoption polls (the operator's warm pools).

    The app also holds the runner API alone, ``app[RUNNER_SERVER]``: what serves it on
    a runner port of its own (``helmr.server.runner_server``), with the same guard and
    metrics.
    """
    metrics = Metrics(tuple(collectors), refresh_metrics)
    streams = Streams()
    public = PublicApi(control, mirror, streams, keepalive=keepalive, traces=traces)
    runner_ops = operations(
        RunnerApi(control, runner_connected, traces=traces, adoptions=adoptions)
    )
    ops = [
        *operations(public, WorkspaceApi(control, workspaces)),
        *runner_ops,
        *operations(SystemApi(metrics, ready, leading)),
    ]
    app = web.Application(
        client_max_size=max_body,
        middlewares=[_middleware(metrics)],
    )
    app.on_shutdown.append(streams.close_all)
    app[OPENAPI] = document(ops, title="Helmr API", version=__version__, error=ErrorBody)
    names = SessionNames(control) if session_names is None else session_names
    guard = AccessGuard(authenticator, runner_tokens, control.get_session, names)
    register(app, ops, guard)
    app[RUNNER_SERVER] = RunnerServer(runner_ops, guard, metrics, max_body=max_body)
    return app
