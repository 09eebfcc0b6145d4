"""The HTTP transport of the client: JSON requests, error mapping, SSE reading."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any

import aiohttp
from pydantic import BaseModel

from helmr import __version__
from helmr.errors import UNAVAILABLE_STATUSES, HelmrError, Unavailable, from_json
from helmr.protocol.api_routes import STREAM_MEDIA_TYPE


@dataclass(frozen=True)
class ServerEvent:
    """One server-sent event."""

    event: str
    data: str
    id: str | None


def _error(status: int, text: str) -> HelmrError:
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return from_json(status, body)
    # Not Helmr's answer (a proxy, a wrong URL): say what came back.
    cls = Unavailable if status in UNAVAILABLE_STATUSES else HelmrError
    return cls(f"HTTP {status} from the server, not a Helmr error body: {text[:200]!r}")


def _query_string(query: BaseModel) -> dict[str, str]:
    return {k: str(v) for k, v in query.model_dump(mode="json", exclude_unset=True).items()}


class _EventParser:
    """Incremental SSE parsing; records can be far longer than aiohttp's line limit."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event = "message"
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerEvent]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        events = []
        for raw in lines:
            line = raw.decode("utf-8").removesuffix("\r")
            if not line:
                if self._data:
                    events.append(ServerEvent(self._event, "\n".join(self._data), self._id))
                self._data, self._event = [], "message"
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                self._id = value
            # other fields and comments (keepalives start with ':') carry nothing for us
        return events


class Transport:
    """One aiohttp session per client, opened on first use (it needs a running loop)."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        ssl: SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"User-Agent": f"helmr-python/{__version__}"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._headers.update(headers or {})
        self._ssl = ssl
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _http(self) -> aiohttp.ClientSession:
        if self._closed:
            # Opening a new connection pool here would leak it: nothing closes it.
            raise RuntimeError("the Helmr client is closed: open a new Client")
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(headers=self._headers, connector=connector)
        return self._session

    async def close(self) -> None:
        """Closes the connections; the client (and every reference made from it)
        sends nothing after."""
        self._closed = True
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        query: BaseModel | None = None,
        wait: float = 0.0,
    ) -> Any:
        """The decoded JSON reply; a Helmr error for any non-2xx. ``wait``: seconds
        the server may legitimately hold the request (long polls) on top of the timeout.

        ``body`` and ``query`` are ``helmr.protocol.api_requests`` models, made
        with ``model_construct``: the server is the one judge of a request (a
        wrong field is its 400 ``invalid_input``), the model fixes the names.
        Only the fields given are sent.
        """
        async with self._http().request(
            method,
            self.base_url + path,
            json=None if body is None else body.model_dump(mode="json", exclude_unset=True),
            params=None if query is None else _query_string(query),
            timeout=aiohttp.ClientTimeout(total=self._timeout + wait),
        ) as response:
            text = await response.text()
            if response.status >= 300:
                raise _error(response.status, text)
            return json.loads(text)

    async def events(
        self, path: str, *, query: BaseModel, headers: Mapping[str, str], idle: float
    ) -> AsyncIterator[ServerEvent]:
        """The server-sent events of one connection, until the server ends it.

        ``idle`` bounds the silence between two reads (the server sends keepalives)."""
        timeout = aiohttp.ClientTimeout(total=None, connect=self._timeout, sock_read=idle)
        async with self._http().get(
            self.base_url + path,
            params=_query_string(query),
            headers={"Accept": STREAM_MEDIA_TYPE, **headers},
            timeout=timeout,
        ) as response:
            if response.status >= 300:
                raise _error(response.status, await response.text())
            parser = _EventParser()
            async for chunk in response.content.iter_any():
                for event in parser.feed(chunk):
                    yield event
