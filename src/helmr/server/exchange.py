"""What the API's code reads of a request, whichever HTTP server carries it.

aiohttp serves the public API, and the runner API beside it when they share a port.
On a port of its own (the chart's), the runner API is served by
:mod:`helmr.server.runner_server`, whose waiting long poll holds a fraction of
aiohttp's request. Routing, the guard, the inputs and the handlers read a request
through these two protocols, so both servers serve the same declared routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from multidict import MultiMapping


class Incoming(Protocol):
    """A request as routing reads it: its line, its headers and its body. aiohttp's
    ``web.Request`` is one as it is."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def match_info(self) -> Mapping[str, str]:
        """The route's path parameters, by name."""

    @property
    def query(self) -> MultiMapping[str]:
        """The query's parameters, a repeated one as often as it came."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Looked up case-insensitively."""

    @property
    def content_type(self) -> str:
        """The media type of the body, without its parameters."""

    async def read(self) -> bytes:
        """The whole body."""


class Exchange(Protocol):
    """What a handler may ask of the request it answers beyond its parsed inputs (a
    handler declares it as its ``exchange`` parameter)."""

    @property
    def connected(self) -> bool:
        """Whether the caller still listens: a long poll woken for one that left starts
        no Turn (``helmr.control.surface.Connection``)."""

    @property
    def held(self) -> bool:
        """Whether the reply's head was sent (:meth:`hold`)."""

    async def hold(self) -> None:
        """Sends the reply's head now: 200, JSON, its length not known. Its body is the
        handler's answer, sent as it returns (a held settlement, runner protocol 5);
        an error after it can no longer be answered as one."""
