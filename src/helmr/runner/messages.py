"""Delivering a turn's messages to its one handler, in order, one at a time.

The pump long-polls ``messages/next`` and, for each message, reports
``started``, runs the handler, then reports ``delivered``, ``rejected`` (the
handler raised ``MessageRejected``) or ``unknown`` (any other exception, which
is logged and does not stop the pump). Settlement first stops the pump taking
messages (``stop_taking``: a waiting poll is abandoned, and a message handed out
but never started is rejected by the server as settlement begins, so none is
half-handled), then waits for the handler in progress (``stopped``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from helmr.errors import Conflict, MessageRejected, TurnNotActive, TurnSettling
from helmr.protocol import (
    Message,
    MessageOutcome,
    MessageOutcomeRequest,
    NextMessageReply,
    NextMessageRequest,
    routes,
)
from helmr.runner.transport import Call

log = logging.getLogger(__name__)

MessageHandler = Callable[[Message], Awaitable[None]]

NEXT_MESSAGE_WINDOW = 30.0
"""Seconds one ``messages/next`` request may wait; the pump polls again after it."""


class MessagePump:
    def __init__(
        self,
        call: Call,
        session_id: str,
        turn_id: str,
        handler: MessageHandler,
        drain_output: Callable[[], Awaitable[Any]],
    ) -> None:
        self._call = call
        self._session_id = session_id
        self._turn_id = turn_id
        self._handler = handler
        self._drain_output = drain_output
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._poll: asyncio.Task[NextMessageReply] | None = None

    async def start(self) -> None:
        """Acknowledges readiness to the server, then delivers in the background."""
        await self._call(routes.messages_ready(self._session_id, self._turn_id))
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop_taking(self) -> None:
        """Takes no more messages; the handler in progress, if any, goes on."""
        if self._task is asyncio.current_task():
            raise Conflict(
                "a message handler cannot settle its own turn: settlement waits for the "
                "handler to return; settle from run (e.g. after an asyncio.Event the handler sets)"
            )
        self._stopping = True
        if self._poll is not None:
            self._poll.cancel()

    async def stopped(self) -> None:
        """Returns once the handler in progress, if any, is done and reported."""
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        try:
            while not self._stopping:
                message = await self._next()
                # A message received while stopping is left unstarted: the server rejects it.
                if message is not None and not self._stopping:
                    await self._deliver(message)
        except (TurnNotActive, TurnSettling):
            return  # the turn is over or settling: no more messages for it
        except Exception:
            # A background task: nobody would see the error unless it is logged.
            log.exception("message delivery for turn %s stopped", self._turn_id)

    async def _next(self) -> Message | None:
        self._poll = asyncio.get_running_loop().create_task(self._request_next())
        try:
            return (await self._poll).message
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._stopping and task is not None and not task.cancelling():
                return None  # stop() abandoned the poll, not a cancel of the pump
            raise
        finally:
            self._poll = None

    async def _request_next(self) -> NextMessageReply:
        reply = await self._call(
            routes.messages_next(self._session_id, self._turn_id),
            NextMessageRequest(timeout=NEXT_MESSAGE_WINDOW),
            wait=NEXT_MESSAGE_WINDOW,
        )
        return NextMessageReply.from_json(reply)

    async def _deliver(self, message: Message) -> None:
        await self._report(message, MessageOutcome.STARTED, None)
        reason: str | None
        try:
            await self._handler(message)
        except MessageRejected as e:
            outcome, reason = MessageOutcome.REJECTED, e.message
        except Exception as e:
            log.exception("message handler failed on message %s", message.id)
            outcome, reason = MessageOutcome.UNKNOWN, f"{type(e).__name__}: {e}"
        else:
            outcome, reason = MessageOutcome.DELIVERED, None
        if self._stopping:
            # The Turn settles: the server commits its outcome on this report, so
            # the output the handler started must be recorded first.
            await self._drain_output()
        await self._report(message, outcome, reason)

    async def _report(self, message: Message, outcome: MessageOutcome, reason: str | None) -> None:
        path = routes.message_outcome(self._session_id, self._turn_id, message.id, outcome)
        await self._call(path, MessageOutcomeRequest(reason=reason))
