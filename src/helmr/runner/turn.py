"""A Turn inside an actor: its input, output, response, messages and explicit settlement."""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from helmr.errors import Conflict, HelmrError, InvalidInput, PayloadTooLarge, TurnNotActive
from helmr.protocol import (
    CompleteRequest,
    ErrorInfo,
    FailRequest,
    NextReceive,
    RespondRequest,
    TurnAssignment,
    routes,
)
from helmr.runner.http import Heard
from helmr.runner.messages import MessageHandler, MessagePump
from helmr.runner.output import Output
from helmr.runner.signal import Signal
from helmr.runner.transport import Call
from helmr.runner.wire import request
from helmr.states import NO_RESULT

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

# The error codes of a failed Turn (spec/000: "The handler threw, returned an
# invalid result or broke the Turn contract"), each saying which.
ACTOR_ERROR = "actor_error"
"""The actor failed the Turn itself, giving a plain exception or string."""
HANDLER_RAISED = "handler_raised"
"""``run`` raised while it held the Turn (the runner fails it, then exits 1)."""
INVALID_RESULT = "invalid_result"
"""``complete(result)`` was given a result that is not JSON or is too large."""
TURN_CONTRACT_BROKEN = "turn_contract_broken"
"""``run`` returned while it held the Turn unsettled (the runner fails it, then exits 0)."""


class NextTurn(Protocol):
    """Whether a settlement also asks for the next turn, and who sends it then."""

    def next_receive(self) -> NextReceive | None:
        """The ``next`` to send with a settlement; None: ask nothing."""

    async def settle(
        self, call: Call, path: str, body: CompleteRequest | FailRequest, asked: NextReceive
    ) -> None:
        """Sends the settlement ``body`` (asking ``asked``) with ``call``; returns once
        it has committed, keeping what it got for the actor's next ``receive``."""


class _State(enum.Enum):
    ACTIVE = "active"
    SETTLING = "settling"
    SETTLED = "settled"


class Turn:
    """One unit of work handed to this process by ``session.receive()``.

    Nothing settles a turn but ``complete`` or ``fail``: not returning from
    ``run``, not asking for the next turn, not the end of an output stream.
    """

    def __init__(
        self,
        assignment: TurnAssignment,
        call: Call,
        session_id: str,
        *,
        after: NextTurn | None = None,
        batch_output: bool = False,
    ) -> None:
        """``after``: the Session, asked at settlement whether to start the next turn in
        the same request (protocol 3); ``batch_output``: send bursts of output as one."""
        self.id: str = assignment.id
        self.sequence: int = assignment.sequence
        self.input: Any = assignment.input
        self.source: Any = assignment.source
        self.created_at: datetime = assignment.created_at
        self.signal = Signal()
        self._call_server = call
        self._session_id = session_id
        self._after = after
        batch = routes.turn_output_batch(session_id, self.id) if batch_output else None
        self.output = Output(self._call, routes.turn_output(session_id, self.id), batch)
        self._pump: MessagePump | None = None
        self._state = _State.ACTIVE
        self._settled = asyncio.Event()
        self._no_settlement_sent = asyncio.Event()  # cleared while a settlement awaits its reply
        self._no_settlement_sent.set()

    @property
    def settled(self) -> bool:
        """True once ``complete`` or ``fail`` went through, or the server ended the turn."""
        return self._state is _State.SETTLED

    async def respond(self, value: Any) -> None:
        """Sets the turn's human-facing response (JSON), delivered with a completed outcome."""
        body = request(RespondRequest, value=value)
        await self._call(routes.respond(self._session_id, self.id), body)

    async def on_message(self, handler: MessageHandler) -> None:
        """Registers the turn's one message handler; returns once the server knows it is ready.

        Messages are handed to ``handler`` one at a time, in the order they were
        accepted. Raise ``MessageRejected`` for a known rejection; any other
        exception is logged and reported as an unknown outcome, and delivery goes on.
        """
        if self._pump is not None:
            raise Conflict(f"turn {self.id} already has its message handler")
        if self._state is not _State.ACTIVE:
            raise Conflict(f"turn {self.id} is {self._state.value}: it takes no more messages")
        self._pump = MessagePump(self._call, self._session_id, self.id, handler, self.output.drain)
        try:
            await self._pump.start()
        except BaseException:
            self._pump = None  # not registered: the actor may register again
            raise

    async def complete(self, result: Any = NO_RESULT) -> None:
        """Settles the turn as completed, after its started output and messages finish.

        ``complete()`` records no result; ``complete(None)`` records JSON null. A
        result that is not JSON, or that the server refuses as invalid or too large,
        fails the turn instead (code ``invalid_result``, logged); ``complete``
        then returns as after any settlement.
        """
        body = CompleteRequest()
        try:
            if result is not NO_RESULT:
                body = request(CompleteRequest, result=result)
            await self._settle(routes.complete(self._session_id, self.id), body)
        except (InvalidInput, PayloadTooLarge) as e:
            log.error("turn %s returned an invalid result; failing it: %s", self.id, e.message)
            await self.fail(e, code=INVALID_RESULT)

    async def fail(self, error: BaseException | str, *, code: str | None = None) -> None:
        """Settles the turn as failed, after its started output and messages finish.

        The error code is ``code``, else a Helmr error's own code, else ``actor_error``.
        """
        if isinstance(error, BaseException):
            message = str(error) or type(error).__name__
            default = error.code if isinstance(error, HelmrError) else ACTOR_ERROR
        else:
            message, default = error, ACTOR_ERROR
        body = FailRequest(error=ErrorInfo(code=code or default, message=message))
        await self._settle(routes.fail(self._session_id, self.id), body)

    async def _settle(self, path: str, body: CompleteRequest | FailRequest) -> None:
        if self._state is not _State.ACTIVE:
            raise Conflict(f"turn {self.id} is {self._state.value}: a turn settles once")
        self._state = _State.SETTLING
        try:
            if self._pump is not None:
                self._pump.stop_taking()
            await self.output.drain()
            # Told before the handler in progress returns (spec/001): from here the
            # server refuses sends with turn_settling and rejects the accepted
            # messages not started; it commits the outcome once that handler reports.
            after = self._after
            asked = None if after is None else after.next_receive()
            self._no_settlement_sent.clear()
            try:
                if after is None or asked is None:
                    await self._call(path, body)
                else:
                    await after.settle(self._call, path, replace(body, next=asked), asked)
            finally:
                self._no_settlement_sent.set()
            if self._pump is not None:
                await self._pump.stopped()
        except BaseException:
            if not self.settled:  # the server did not end it: the actor may try again
                self._state = _State.ACTIVE
            raise
        self._mark_settled()

    async def _wait_settled(self) -> None:
        await self._settled.wait()

    async def _settlement_answered(self) -> None:
        """Returns once no settlement of this turn awaits its reply (at once when none
        was sent): the server has then either ended the turn, or is waiting for its
        message handler in progress to report, or refused the settlement."""
        await self._no_settlement_sent.wait()

    async def _call(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        try:
            return await self._call_server(path, body, wait=wait, heard=heard)
        except TurnNotActive:
            # The server ended the turn (interrupted, cancelled): stop its work.
            self.signal.abort("turn_not_active")
            self._mark_settled()
            raise

    def _mark_settled(self) -> None:
        self._state = _State.SETTLED
        self._settled.set()
