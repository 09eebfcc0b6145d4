"""``Client``: the entry point outside an actor."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from ssl import SSLContext
from typing import NamedTuple

from helmr.client._http import Transport
from helmr.client.models import Run, StartResult
from helmr.client.sessions import SessionRef, Sessions, session_settings
from helmr.client.workspaces import Workspaces
from helmr.protocol import api_routes as routes
from helmr.protocol.api_requests import SecretKey, SecretSource, StartBody


class Started(NamedTuple):
    """What ``actors.start`` returns: ``session, run = await client.actors.start(...)``."""

    session: SessionRef
    run: Run | None


class Actors:
    def __init__(self, transport: Transport) -> None:
        self._http = transport

    async def start(
        self,
        actor: str,
        *,
        namespace: str,
        workspace: str,
        key: str | None = None,
        idempotency_key: str | None = None,
        env: Mapping[str, str | SecretKey] | None = None,
        env_from: Sequence[str | SecretSource] | None = None,
    ) -> Started:
        """Starts a session of ``actor`` owning ``workspace``. Start takes no input:
        enqueue work afterwards. A repeated ``idempotency_key`` returns the same session.

        ``env``: the session's own environment variables, each a value or a key of a
        Secret in ``namespace`` (``SecretKey(secret=..., key=...)``); ``env_from``: Secrets
        (by name, or ``SecretSource(secret=..., prefix=...)``) whose every key becomes one. The
        actor reads them in ``os.environ`` from ``run`` on (docs/sdk.md); Secret values
        never pass through Helmr's API."""
        body = StartBody.model_construct(
            workspace=workspace,
            key=key,
            idempotency_key=idempotency_key,
            **session_settings(env, env_from),
        )
        reply = StartResult.model_validate(
            await self._http.request("POST", routes.actor_sessions(namespace, actor), body=body)
        )
        return Started(SessionRef(self._http, reply.session.id, reply.session), reply.run)


class Client:
    """An async Helmr client: ``async with Client(url, token) as client: ...``.

    ``base_url`` and ``token`` default to ``HELMR_URL`` and ``HELMR_TOKEN``;
    ``timeout`` bounds each request (long polls add their own wait to it).
    ``headers`` go with every request and ``ssl`` verifies (and may identify
    the client to) an HTTPS server: what a route through a proxy needs, such as
    the apiserver's (``helmr.kubectl``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        ssl: SSLContext | None = None,
    ) -> None:
        url = base_url or os.environ.get("HELMR_URL")
        if not url:
            raise ValueError("give the Helmr API URL (base_url, or HELMR_URL)")
        self._http = Transport(
            url,
            token or os.environ.get("HELMR_TOKEN"),
            timeout=timeout,
            headers=headers,
            ssl=ssl,
        )
        self.actors = Actors(self._http)
        self.sessions = Sessions(self._http)
        self.workspaces = Workspaces(self._http)

    @property
    def base_url(self) -> str:
        return self._http.base_url

    async def aclose(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
