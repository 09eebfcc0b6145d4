"""HTTP to the control plane's runner API: auth, fencing, errors and retries.

The bearer token is asked of ``token`` for every call: the runner's is a
projected service-account token file the kubelet rewrites before it expires.
Every runner call is safe to repeat (see ``helmr.protocol``), so a call is
retried after connection errors and 502/503/504 with backoff, for as long as
a restarting control plane may take. A ``stale_epoch`` answer fences the
process: ``on_fenced`` runs (the entrypoint exits there) and every later call
fails without touching the network, so a fenced process writes nothing more.
A call that cannot reach the control plane for that long raises ``Unavailable``
(or ``TimeoutError`` when its reply never came).

Bodies are ``helmr.protocol`` dataclasses sent as ``to_json`` makes them; the
HTTP is ``helmr.runner.http``'s (the runner imports neither pydantic nor aiohttp).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from helmr.errors import UNAVAILABLE_STATUSES, HelmrError, StaleEpoch, Unavailable, from_json
from helmr.protocol import EPOCH_HEADER, to_json
from helmr.runner.http import Heard, HttpClient

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

REPLY_TIMEOUT = 30.0
"""Seconds a call may take beyond the time the server may hold it (long polls)."""


class Call(Protocol):
    """One runner call: POST ``body`` (``{}`` when None) to ``path``; the decoded reply."""

    async def __call__(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        """``wait`` is how long the server may hold the request (a long poll); ``heard``
        is told each reply's status as soon as its head has come (every attempt's)."""


class Transport:
    """The runner's only connection to the control plane. Use as ``async with``."""

    def __init__(
        self,
        url: str,
        session_id: str,
        token: Callable[[], str],
        epoch: int,
        *,
        on_fenced: Callable[[], None],
        retry_for: float = 300.0,
        http: HttpClient | None = None,
    ) -> None:
        """``http``: connections this transport shares with an earlier one of the
        process (a pooled runner's adoption poll's), left open at its end."""
        self.session_id = session_id
        self._url = url.rstrip("/")
        self._token = token
        self._headers = {EPOCH_HEADER: str(epoch)}
        self._on_fenced = on_fenced
        self._retry_for = retry_for
        self._fenced = False
        self._shared = http
        self._http: HttpClient | None = None

    async def __aenter__(self) -> Transport:
        self._http = self._shared or HttpClient(self._url)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None and self._shared is None:
            await self._http.close()

    async def call(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        payload = json.dumps({} if body is None else to_json(body)).encode()
        loop = asyncio.get_running_loop()
        give_up: float | None = None
        delay = 0.1
        while True:
            if self._fenced:
                raise StaleEpoch("this runner process is fenced: a newer process runs the session")
            try:
                return await self._post(path, payload, wait, heard)
            except (OSError, Unavailable) as e:  # OSError: ConnectionError, TimeoutError
                now = loop.time()
                give_up = now + self._retry_for if give_up is None else give_up
                if now >= give_up:
                    if isinstance(e, HelmrError | TimeoutError):
                        raise
                    raise Unavailable(f"the control plane cannot be reached: {e}") from e
                log.warning("POST %s failed (%r); retrying in %.1f s", path, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _post(self, path: str, payload: bytes, wait: float, heard: Heard | None) -> Any:
        if self._http is None:
            raise RuntimeError("use the Transport as 'async with Transport(...)'")
        headers = {**self._headers, "Authorization": f"Bearer {self._token()}"}
        async with asyncio.timeout(wait + REPLY_TIMEOUT):
            status, raw = await self._http.post(path, payload, headers, heard)
        if status in UNAVAILABLE_STATUSES:
            raise Unavailable(f"HTTP {status} from the control plane")
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}  # not our server's body (a proxy's page): keep the status only
        if status < 400:
            return data
        error = from_json(status, data)
        if isinstance(error, StaleEpoch):
            self._fence()
        raise error

    def _fence(self) -> None:
        if not self._fenced:
            self._fenced = True
            log.critical("fenced: a newer process of session %s is running", self.session_id)
            self._on_fenced()
