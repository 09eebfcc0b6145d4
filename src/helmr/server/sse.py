"""Server-sent events: following a session's timeline from a cursor.

Each record is one SSE message whose ``id`` is its sequence, so a client
(or a browser's EventSource) resumes with ``Last-Event-ID`` after a drop.
When the session has ended and every record is sent, a final ``end`` event
says the stream is complete, so followers stop instead of reconnecting.
A cursor below the retention boundary (``retained_after``, as a page says)
gets a ``retention`` event first, naming both, so a stream started (or left
behind) below it never skips history silently; its ``id`` is the boundary.
A client that disconnects only stops its own observation: nothing here
touches the session. A server shutting down ends its streams at once (the
clients reconnect elsewhere) rather than waiting out its grace period on them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web
from pydantic import BaseModel

from helmr.protocol.api import RetentionBoundary
from helmr.protocol.api_routes import STREAM_END_EVENT, STREAM_MEDIA_TYPE, STREAM_RETENTION_EVENT

KEEPALIVE = b": keepalive\n\n"


class Record(Protocol):
    @property
    def sequence(self) -> int: ...

    def model_dump_json(self) -> str: ...


class Page(Protocol):
    @property
    def records(self) -> Sequence[Record]: ...

    @property
    def has_more(self) -> bool: ...

    @property
    def retained_after(self) -> int: ...


@dataclass(frozen=True)
class Timeline:
    """How the stream reads one session's timeline."""

    # The page after a cursor, waiting up to the given seconds for one to exist.
    page: Callable[[int, float], Awaitable[Page]]
    # The session's final status once it has ended, else None.
    ended: Callable[[], Awaitable[str | None]]


class StreamEnd(BaseModel):
    """The data of the final ``end`` event: how the session ended."""

    status: str


class Streams:
    """The streams being served, so that shutdown can end them."""

    def __init__(self) -> None:
        self._handlers: set[asyncio.Task[Any]] = set()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        task = asyncio.current_task()
        assert task is not None  # aiohttp runs each handler in its own task
        self._handlers.add(task)
        try:
            yield
        finally:
            self._handlers.discard(task)

    async def close_all(self, app: web.Application) -> None:
        """An ``on_shutdown`` hook: a stream never finishes by itself while its session lives."""
        for task in list(self._handlers):
            task.cancel()


def frame(record: Record) -> bytes:
    return f"id: {record.sequence}\ndata: {record.model_dump_json()}\n\n".encode()


def retention_frame(after: int, retained_after: int) -> bytes:
    data = RetentionBoundary(after=after, retained_after=retained_after).model_dump_json()
    return f"event: {STREAM_RETENTION_EVENT}\nid: {retained_after}\ndata: {data}\n\n".encode()


def end_frame(status: str) -> bytes:
    data = StreamEnd(status=status).model_dump_json()
    return f"event: {STREAM_END_EVENT}\ndata: {data}\n\n".encode()


async def follow(
    request: web.Request, timeline: Timeline, after: int, *, keepalive: float, streams: Streams
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": STREAM_MEDIA_TYPE,
            "Cache-Control": "no-cache",
            # Proxies (nginx ingress) would otherwise buffer the stream.
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    cursor, wait = after, 0.0
    with streams.serving(), contextlib.suppress(ConnectionResetError):
        # ConnectionResetError: the observer went away; the session is not ours to touch.
        while True:
            # The status is read before the page: a session that had ended then
            # has committed all its records, so draining after it is complete.
            ended = await timeline.ended()
            page = await timeline.page(cursor, 0.0 if ended else wait)
            if cursor < page.retained_after:
                await response.write(retention_frame(cursor, page.retained_after))
                cursor = page.retained_after
            for record in page.records:
                await response.write(frame(record))
                cursor = record.sequence
            if page.has_more:
                wait = 0.0
                continue
            if ended is not None:
                await response.write(end_frame(ended))
                break
            if wait and not page.records:
                await response.write(KEEPALIVE)
            wait = keepalive
        await response.write_eof()
    return response
