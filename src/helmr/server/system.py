"""Routes for operating the server itself: probes, metrics, the API document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, RootModel

from helmr.errors import NotReady
from helmr.server.metrics import CONTENT_TYPE, Metrics
from helmr.server.routing import route


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(Health):
    leader: bool = True
    """Whether this replica leads: runs the supervisor and the status mirror. Every
    ready replica serves the whole API; one leads at a time (docs/install.md)."""


def _leads() -> bool:
    return True


class OpenApiDocument(RootModel[dict[str, Any]]):
    """An OpenAPI 3.1 document."""


OPENAPI: web.AppKey[dict[str, Any]] = web.AppKey("openapi", dict)


class SystemApi:
    def __init__(
        self,
        metrics: Metrics,
        ready: Callable[[], Awaitable[bool]],
        leading: Callable[[], bool] = _leads,
    ) -> None:
        self._metrics = metrics
        self._ready = ready
        self._leading = leading

    @route(
        "GET",
        "/healthz",
        summary="Liveness: the process serves requests.",
        access="none",
        tag="system",
    )
    async def healthz(self) -> Health:
        return Health()

    @route(
        "GET",
        "/readyz",
        summary="Readiness: the control plane can serve (the operator decides), and "
        "whether this replica leads.",
        access="none",
        tag="system",
        errors=(503,),
    )
    async def readyz(self) -> Readiness:
        if not await self._ready():
            raise NotReady("not ready yet: the control plane cannot serve requests; retry later")
        return Readiness(leader=self._leading())

    @route(
        "GET",
        "/metrics",
        summary="Prometheus metrics.",
        access="none",
        tag="system",
        media_type=CONTENT_TYPE,
    )
    async def metrics(self) -> web.Response:
        body = await self._metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    @route(
        "GET",
        "/openapi.json",
        summary="This API's OpenAPI 3.1 document.",
        access="none",
        tag="system",
    )
    async def openapi(self, request: web.Request) -> OpenApiDocument:
        # The app holds the document: it is made from every route, these included.
        return OpenApiDocument(request.app[OPENAPI])
