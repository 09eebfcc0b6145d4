"""Durable output, written in the order it was started.

``write`` and ``pipe`` start their work at once and return the task doing it:
``await`` it to wait for (and see the errors of) that write, or let it run.
Each write waits for the one started before it, so output is recorded in the
order the actor started it even when nothing is awaited; ``drain`` waits for
every started write, which is what turn settlement needs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable, Iterable
from typing import Any

from helmr.protocol import OutputRequest
from helmr.runner.transport import Call
from helmr.runner.wire import request


class Output:
    """The output of a turn (``turn.output``) or of the session (``session.output``)."""

    def __init__(self, call: Call, path: str) -> None:
        self._call = call
        self._path = path
        self._tail: asyncio.Task[None] | None = None
        self._started: set[asyncio.Task[None]] = set()

    def write(self, value: Any, idempotency_key: str | None = None) -> asyncio.Task[None]:
        """Appends one JSON ``value``; with the same key, a value is recorded once.

        Without a key the runner makes one, so its own retries never duplicate.
        A value that is not JSON raises ``InvalidInput`` here, before anything is sent.
        """
        body = request(OutputRequest, value=value, idempotency_key=idempotency_key or _new_key())
        task = self._start(self._send(self._tail, body))
        self._tail = task
        return task

    def pipe(self, values: Iterable[Any] | AsyncIterable[Any]) -> asyncio.Task[None]:
        """Writes each value of a finite (async or sync) iterable, in order.

        The end of the stream is only the end of the stream: it settles nothing.
        """
        return self._start(self._pipe(values))

    async def drain(self) -> None:
        """Waits until every write and pipe started so far has finished, however it ended."""
        while self._started:
            await asyncio.wait(set(self._started))

    def _start(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._started.add(task)
        task.add_done_callback(self._started.discard)
        return task

    async def _send(self, previous: asyncio.Task[None] | None, body: OutputRequest) -> None:
        if previous is not None:
            # Order only: the earlier write's failure belongs to whoever awaits it.
            await asyncio.wait({previous})
        await self._call(self._path, body)

    async def _pipe(self, values: Iterable[Any] | AsyncIterable[Any]) -> None:
        if isinstance(values, AsyncIterable):
            async for value in values:
                await self.write(value)
        else:
            for value in values:
                await self.write(value)


def _new_key() -> str:
    """A random idempotency key, as ``uuid.uuid4().hex`` looks (uuid imports ``platform``,
    a cost on the runner's cold start)."""
    return os.urandom(16).hex()
