"""The runner API under ``/runner/v1``: what a runner process calls, per ``helmr.protocol``.

Wire models, route patterns and the epoch header are ``helmr.protocol``'s,
shared with the runner. Every call is fenced by its ``Helmr-Process-Epoch``;
the fencing itself (409 ``stale_epoch``) is Control's. Long polls are cut to
``MAX_WAIT``, which the protocol allows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from pydantic import JsonValue, RootModel

from helmr.control import NO_RESULT
from helmr.control.runner_api import RunnerControl
from helmr.control.turns import Drained
from helmr.errors import HelmrError, NotFound
from helmr.protocol import (
    Ack,
    AdoptionReply,
    AdoptionRequest,
    CompleteRequest,
    FailRequest,
    Message,
    MessageOutcome,
    MessageOutcomeRequest,
    NextMessageReply,
    NextMessageRequest,
    NextReceive,
    OutputBatchRequest,
    OutputRequest,
    ReceiveReply,
    ReceiveRequest,
    RespondRequest,
    SessionClosed,
    Settled,
    StopsReply,
    StopsRequest,
    StorageReport,
    TurnAssignment,
    routes,
)
from helmr.protocol.api import TurnView
from helmr.protocol.api_requests import (
    MAX_WAIT,
    Id,
    NoBody,
    RunnerHeaders,
    SessionPath,
    TurnPath,
)
from helmr.server.exchange import Exchange
from helmr.server.routing import route
from helmr.server.traces import NoTraces, TurnTraceFacts

TAG = "runner"

Outcome = TypeVar("Outcome")
"""What a settlement records: a completion's result, a failure's error."""

# Every runner call is a POST with the session's runner token.
post = partial(route, "POST", access="runner", tag=TAG)


class MessagePath(TurnPath):
    message_id: Id
    outcome: MessageOutcome


class ReceiveResponse(RootModel[ReceiveReply]):
    """The turn to run now, or ``{"closed": true}`` once there is none for this process."""


RunnerConnected = Callable[[str, int], None]
"""Told (session id, process epoch) as a runner asks for work, before it waits."""


def ignore_connection(session_id: str, epoch: int) -> None:
    return None


class Adoptions(Protocol):
    """Answers pooled runners' adoption polls (the operator's warm pools)."""

    async def answer(self, token: str, timeout: float) -> AdoptionReply:  # noqa: ASYNC109
        """The adoption of the pod ``token`` is bound to, once there is one (401 for a
        token that is no runner pod's; 408 ``receive_timeout`` after ``timeout``)."""


class RunnerApi:
    def __init__(
        self,
        control: RunnerControl,
        connected: RunnerConnected = ignore_connection,
        *,
        traces: TurnTraceFacts | None = None,
        adoptions: Adoptions | None = None,
    ) -> None:
        """``connected`` hears of every ``receive`` (the operator's metrics: a runner's
        first one of its epoch ends its cold start); ``traces`` of each settlement asked;
        ``adoptions`` answers pooled runners (None: this control plane keeps no pools)."""
        self._control = control
        self._connected = connected
        self._traces = traces or NoTraces()
        self._adoptions = adoptions

    @route(
        "POST",
        routes.ADOPTION,
        access="pod",
        tag=TAG,
        errors=(404, 408),
        summary="A pooled runner long-polls for the Session that adopts it (revision 4).",
    )
    async def adoption(self, subject: str, body: AdoptionRequest) -> AdoptionReply:
        """Authenticated by the pod's runner token (``subject``, checked here, not per
        Session: the pod has none yet); answers its Session, epoch and settings once
        adopted."""
        if self._adoptions is None:
            raise NotFound("this control plane keeps no warm pools")
        return await self._adoptions.answer(subject, min(body.timeout, MAX_WAIT))

    @post(routes.STOPS, summary="Long-poll for a stop of the turns this process holds.")
    async def stops(
        self, path: SessionPath, headers: RunnerHeaders, body: StopsRequest
    ) -> StopsReply:
        """The stop channel: answers, as soon as there are any, the turns among
        ``turn_ids`` to stop (a stop was accepted, or they ended elsewhere);
        ``{"turn_ids": []}`` when none came within the timeout."""
        to_stop = await self._control.requested_stops(
            path.session_id, headers.process_epoch, body.turn_ids, min(body.timeout, MAX_WAIT)
        )
        return StopsReply(turn_ids=to_stop)

    @post(routes.STORAGE, summary="Report how full this process's Computer disk is.")
    async def storage(self, path: SessionPath, headers: RunnerHeaders, body: StorageReport) -> Ack:
        """The Session's disk pressure episode follows (``session.storage_pressure``)."""
        await self._control.report_storage(path.session_id, headers.process_epoch, body.used_bytes)
        return Ack()

    @post(routes.CANCEL, summary="Cancel this process's own session.")
    async def cancel_own(self, path: SessionPath, headers: RunnerHeaders, body: NoBody) -> Ack:
        """As the public cancel: new input is refused, queued turns are cancelled, the
        turn this process holds is stopped (it ends interrupted once this process lets
        go of it) and this process is asked to stop. Repeating it changes nothing."""
        await self._control.cancel_own(path.session_id, headers.process_epoch)
        return Ack()

    @post(routes.SESSION_OUTPUT, summary="Append session-level output.")
    async def session_output(
        self, path: SessionPath, headers: RunnerHeaders, body: OutputRequest
    ) -> Ack:
        await self._control.output(
            path.session_id, headers.process_epoch, None, body.value, body.idempotency_key
        )
        return Ack()

    @post(
        routes.TURN_OUTPUT, summary="Append output of the turn (deduplicated by idempotency_key)."
    )
    async def turn_output(self, path: TurnPath, headers: RunnerHeaders, body: OutputRequest) -> Ack:
        await self._control.output(
            path.session_id, headers.process_epoch, path.turn_id, body.value, body.idempotency_key
        )
        return Ack()

    @post(routes.SESSION_OUTPUT_BATCH, summary="Append a burst of session-level output.")
    async def session_output_batch(
        self, path: SessionPath, headers: RunnerHeaders, body: OutputBatchRequest
    ) -> Ack:
        """Each item as ``output``, in order, in one transaction (all or none)."""
        await self._control.output_batch(path.session_id, headers.process_epoch, None, _items(body))
        return Ack()

    @post(routes.RESPOND, summary="Set the turn's human-facing response.")
    async def respond(self, path: TurnPath, headers: RunnerHeaders, body: RespondRequest) -> Ack:
        await self._control.respond(
            path.session_id, headers.process_epoch, path.turn_id, body.value
        )
        return Ack()

    # The per-Turn routes in the order the router tries them (``routing.register``):
    # a runner's settlement first (from revision 5 a looping runner's one request a
    # Turn, holding its next receive), then output, then the receive (a Run's first,
    # and after a window with no Turn).
    @post(
        routes.COMPLETE,
        summary="Settle the turn as completed ({} without a result).",
        per_turn=True,
    )
    async def complete(
        self, exchange: Exchange, path: TurnPath, headers: RunnerHeaders, body: CompleteRequest
    ) -> Settled:
        """With ``next``, also starts this process's next turn in the same transaction
        (with its ``timeout``, waits for one: the reply is held, :meth:`_with_next`)."""
        settling = self._settle(
            exchange,
            path,
            headers,
            body.next,
            body.result if body.has_result else NO_RESULT,
            self._control.complete,
            self._control.complete_and_take_next,
        )
        del path, headers, body  # see _settle
        return await settling

    @post(routes.FAIL, summary="Settle the turn as failed.", per_turn=True)
    async def fail(
        self, exchange: Exchange, path: TurnPath, headers: RunnerHeaders, body: FailRequest
    ) -> Settled:
        """With ``next``, also starts this process's next turn in the same transaction
        (with its ``timeout``, waits for one: the reply is held, :meth:`_with_next`)."""
        settling = self._settle(
            exchange,
            path,
            headers,
            body.next,
            body.error,
            self._control.fail,
            self._control.fail_and_take_next,
        )
        del path, headers, body  # see _settle
        return await settling

    @post(routes.TURN_OUTPUT_BATCH, summary="Append a burst of the turn's output.", per_turn=True)
    async def turn_output_batch(
        self, path: TurnPath, headers: RunnerHeaders, body: OutputBatchRequest
    ) -> Ack:
        """Each item as the turn's ``output``, in order, in one transaction (all or none)."""
        await self._control.output_batch(
            path.session_id, headers.process_epoch, path.turn_id, _items(body)
        )
        return Ack()

    @post(
        routes.RECEIVE,
        errors=(408,),
        summary="Long-poll for the turn this process runs next.",
        per_turn=True,
    )
    async def receive(
        self, exchange: Exchange, path: SessionPath, headers: RunnerHeaders, body: ReceiveRequest
    ) -> ReceiveResponse:
        """Answers the turn already assigned to this epoch while it is unsettled; 408
        receive_timeout when none came; {"closed": true} when this process gets no more.
        With ``start: false`` it starts none and waits for none (408 at once)."""
        session_id, epoch = path.session_id, headers.process_epoch
        self._connected(session_id, epoch)
        if body.start is False:
            return ReceiveResponse(_receive_reply(await self._control.started(session_id, epoch)))
        if body.actor_settings is not None:
            # Before the wait: a receive that times out has still reported them.
            await self._control.take_code_settings(session_id, epoch, body.actor_settings)
        waiting = self._control.receive(
            session_id,
            epoch,
            min(body.timeout, MAX_WAIT),
            listening=exchange,
            metadata=body.metadata,
            tags=body.tags,
        )
        # An idle runner's receive waits for minutes, 5,000 at once: its inputs'
        # models are not kept that long (bench_long_poll_memory.py).
        del path, headers, body
        return ReceiveResponse(_receive_reply(await waiting))

    async def _settle(
        self,
        exchange: Exchange,
        path: TurnPath,
        headers: RunnerHeaders,
        next: NextReceive | None,
        outcome: Outcome,
        alone: Callable[[str, int, str, Outcome], Awaitable[object]],
        and_take_next: Callable[..., Awaitable[TurnView | Drained | None]],
    ) -> Settled:
        """Settles the turn with ``outcome``: by ``alone`` without ``next``, else by
        ``and_take_next`` (the settlement with the next receive, in one transaction).
        A held reply waits up to two minutes, an idle runner's after its last turn:
        the request's inputs are not kept that long (``bench_long_poll_memory.py
        --held``), which is why the handlers drop theirs once they called this."""
        session_id, epoch, turn_id = path.session_id, headers.process_epoch, path.turn_id
        del path, headers
        self._traces.settling(session_id, turn_id, datetime.now(UTC))
        if next is None:
            await alone(session_id, epoch, turn_id, outcome)
            return Settled()
        settle = partial(and_take_next, session_id, epoch, turn_id, outcome, **_labels(next))
        replying = self._with_next(exchange, session_id, epoch, next, settle)
        del outcome, settle  # a held reply's wait drops the settlement once it is done
        return await replying

    async def _with_next(
        self,
        exchange: Exchange,
        session_id: str,
        epoch: int,
        next: NextReceive,
        settle: Callable[[], Awaitable[TurnView | Drained | None]],
    ) -> Settled:
        """The reply to a settlement asking for the next turn. With ``next.timeout``
        (revision 5) and no turn started by the settlement, the reply is held as a
        ``receive``'s: its head goes once the settlement committed (the runner's
        ``complete`` returns then), its body when the wait ends."""
        if next.timeout is None:
            return _settled(await settle())
        waiting = self._control.settle_and_receive(
            settle,
            session_id,
            epoch,
            min(next.timeout, MAX_WAIT),
            holding=exchange.hold,
            listening=exchange,
            **_labels(next),
        )
        del settle  # the wait drops it once settled: the result is not kept while it waits
        try:
            after = await waiting
        except HelmrError:
            if not exchange.held:
                raise  # the settlement's own error, answered as ever
            # Said after the head (the process fenced, its Session gone): the settlement
            # stands, and the receive the runner sends for "none yet" hears why.
            after = None
        return _settled(after)

    @post(routes.RELEASE, summary="Give back a turn started by a settlement's next, unseen.")
    async def release(self, path: TurnPath, headers: RunnerHeaders, body: NoBody) -> Ack:
        """The turn goes back to the head of the queue (``turn.queued`` again); the
        runner's actor never got it (its ``run`` ended, or it asked with other labels)."""
        await self._control.release(path.session_id, headers.process_epoch, path.turn_id)
        return Ack()

    @post(routes.MESSAGES_READY, summary="The turn's message handler is registered.")
    async def messages_ready(self, path: TurnPath, headers: RunnerHeaders, body: NoBody) -> Ack:
        await self._control.messages_ready(path.session_id, headers.process_epoch, path.turn_id)
        return Ack()

    @post(routes.MESSAGES_NEXT, summary="Long-poll for the turn's next message not yet started.")
    async def next_message(
        self, path: TurnPath, headers: RunnerHeaders, body: NextMessageRequest
    ) -> NextMessageReply:
        message = await self._control.next_message(
            path.session_id, headers.process_epoch, path.turn_id, min(body.timeout, MAX_WAIT)
        )
        if message is None:
            return NextMessageReply()
        return NextMessageReply(message=Message(id=message.id, data=message.data))

    @post(
        routes.MESSAGE_OUTCOME,
        summary="Report a message's handling: started, delivered, rejected or unknown.",
    )
    async def message_outcome(
        self, path: MessagePath, headers: RunnerHeaders, body: MessageOutcomeRequest
    ) -> Ack:
        await self._control.report_message(
            path.session_id,
            headers.process_epoch,
            path.turn_id,
            path.message_id,
            path.outcome,
            body.reason,
        )
        return Ack()


def _receive_reply(turn: TurnView | Drained | None) -> ReceiveReply:
    """What ``receive`` answers for Control's answer (None or drained: no more turns)."""
    if turn is None or turn == "drained":
        return SessionClosed()
    return TurnAssignment(
        id=turn.id,
        sequence=turn.sequence,
        input=turn.input,
        source=turn.source,
        created_at=turn.created_at,
    )


def _settled(after: TurnView | Drained | None) -> Settled:
    return Settled(next=None if after is None else _receive_reply(after))


def _labels(next: NextReceive) -> dict[str, Any]:
    return {"metadata": next.metadata, "tags": next.tags}


def _items(body: OutputBatchRequest) -> list[tuple[JsonValue, str]]:
    return [(item.value, item.idempotency_key) for item in body.items]
