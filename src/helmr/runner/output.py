"""Durable output, written in the order it was started.

``write`` and ``pipe`` start their work at once and return the task doing it:
``await`` it to wait for (and see the errors of) that write, or let it run.
Writes are sent in the order they were started, one request at a time: the
writes started while a request is on its way (or in the same step of the
event loop) go together in the next one, ``output/batch`` when the control
plane speaks runner protocol 3. ``drain`` waits for every started write, which
is what turn settlement needs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable, Iterable
from typing import Any

from helmr.errors import InvalidInput, PayloadTooLarge
from helmr.protocol import OutputBatchRequest, OutputRequest
from helmr.protocol.models import MAX_OUTPUT_BATCH
from helmr.runner.transport import Call
from helmr.runner.wire import request

_Write = tuple[OutputRequest, "asyncio.Future[None]"]


class Output:
    """The output of a turn (``turn.output``) or of the session (``session.output``)."""

    def __init__(self, call: Call, path: str, batch_path: str | None = None) -> None:
        """``batch_path``: where a burst of writes goes as one request (protocol 3);
        None: each write is a request of its own."""
        self._call = call
        self._path = path
        self._batch_path = batch_path
        self._unsent: list[_Write] = []
        self._sender: asyncio.Task[None] | None = None
        self._started: set[asyncio.Task[None]] = set()

    def write(self, value: Any, idempotency_key: str | None = None) -> asyncio.Task[None]:
        """Appends one JSON ``value``; with the same key, a value is recorded once.

        Without a key the runner makes one, so its own retries never duplicate.
        A value that is not JSON raises ``InvalidInput`` here, before anything is sent.
        """
        body = request(OutputRequest, value=value, idempotency_key=idempotency_key or _new_key())
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._unsent.append((body, sent))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_unsent())
        return self._start(_recorded(sent))

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

    async def _send_unsent(self) -> None:
        """Sends the unsent writes, oldest first, as many at once as a batch takes.
        A write's failure belongs to whoever awaits it; the next ones are still sent."""
        while self._unsent:
            most = 1 if self._batch_path is None else MAX_OUTPUT_BATCH
            burst, self._unsent = self._unsent[:most], self._unsent[most:]
            try:
                await self._send(burst)
            except (InvalidInput, PayloadTooLarge):
                # (Raised for a batch only.) A value the server refuses, or a burst
                # too large: each alone, so that only the writes at fault fail.
                for write in burst:
                    await self._send([write])

    async def _send(self, burst: list[_Write]) -> None:
        """One request for ``burst``; its outcome is each write's, but a batch refused
        as bad input, which is raised for the caller to send each write alone."""
        try:
            if len(burst) == 1 or self._batch_path is None:
                [(body, _)] = burst
                await self._call(self._path, body)
            else:
                batch = OutputBatchRequest(items=[body for body, _ in burst])
                await self._call(self._batch_path, batch)
        except (InvalidInput, PayloadTooLarge) as e:
            if len(burst) > 1:
                raise
            _settle(burst, e)
        except BaseException as e:
            _settle(burst, e)
            if not isinstance(e, Exception):
                raise
        else:
            _settle(burst, None)

    async def _pipe(self, values: Iterable[Any] | AsyncIterable[Any]) -> None:
        if isinstance(values, AsyncIterable):
            async for value in values:
                await self.write(value)
        else:
            for value in values:
                await self.write(value)


async def _recorded(sent: asyncio.Future[None]) -> None:
    await sent


def _settle(burst: list[_Write], error: BaseException | None) -> None:
    for _, sent in burst:
        if sent.done():
            continue
        if error is None:
            sent.set_result(None)
        elif isinstance(error, asyncio.CancelledError):
            sent.cancel()
        else:
            sent.set_exception(error)


def _new_key() -> str:
    """A random idempotency key, as ``uuid.uuid4().hex`` looks (uuid imports ``platform``,
    a cost on the runner's cold start)."""
    return os.urandom(16).hex()
