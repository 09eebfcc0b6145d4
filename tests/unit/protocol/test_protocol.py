"""The runner wire format: what each side can rely on when parsing the other."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from helmr.protocol import (
    CompleteRequest,
    ErrorInfo,
    FailRequest,
    Message,
    MessageOutcome,
    NextMessageReply,
    OutputRequest,
    ReceiveRequest,
    SessionClosed,
    StopsReply,
    StopsRequest,
    TurnAssignment,
    parse_receive_reply,
    routes,
    to_json,
)
from helmr.protocol.api_requests import RunnerHeaders


def server_reads(model: type[Any], body: dict[str, Any]) -> Any:
    """The body as the server's runner API parses it (pydantic over the dataclass)."""
    return TypeAdapter(model).validate_python(body)


def server_sends(model: type[Any], reply: Any) -> Any:
    return TypeAdapter(model).dump_python(reply, mode="json")


def test_complete_without_result_differs_from_complete_with_null() -> None:
    absent = CompleteRequest()
    null = CompleteRequest(result=None)

    assert to_json(absent) == {}
    assert to_json(null) == {"result": None}
    assert not absent.has_result
    assert null.has_result
    # The server sees the same distinction after parsing the JSON body.
    assert not server_reads(CompleteRequest, {}).has_result
    assert server_reads(CompleteRequest, {"result": None}).has_result


@pytest.mark.parametrize(
    "body",
    [
        ReceiveRequest(timeout=30, idle_timeout=None),
        ReceiveRequest(timeout=1.5, idle_timeout=300),
        OutputRequest(value={"a": [1, None]}, idempotency_key="k"),
        CompleteRequest(result={"done": True}),
        FailRequest(error=ErrorInfo(code="actor_error", message="it broke")),
        StopsRequest(turn_ids=["turn_1"], timeout=30),
    ],
    ids=lambda body: type(body).__name__,
)
def test_the_server_reads_what_the_runner_sends(body: Any) -> None:
    assert server_reads(type(body), to_json(body)) == body


def test_the_runner_reads_what_the_server_sends() -> None:
    turn = TurnAssignment(
        id="turn_1", sequence=2, input={"x": 1}, created_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert parse_receive_reply(server_sends(TurnAssignment, turn)) == turn
    assert isinstance(
        parse_receive_reply(server_sends(SessionClosed, SessionClosed())), SessionClosed
    )
    reply = NextMessageReply(message=Message(id="msg_1", data=[1]))
    assert NextMessageReply.from_json(server_sends(NextMessageReply, reply)) == reply
    stops = StopsReply(turn_ids=["turn_1"])
    assert StopsReply.from_json(server_sends(StopsReply, stops)) == stops


def test_receive_reply_is_a_turn_or_closed() -> None:
    turn = parse_receive_reply(
        {
            "id": "turn_1",
            "sequence": 1,
            "input": {"x": [1, None]},
            "source": "api",
            "created_at": "2024-01-01T00:00:00Z",
            "from_a_newer_server": True,
        }
    )
    assert isinstance(turn, TurnAssignment)
    assert turn.input == {"x": [1, None]}
    assert turn.created_at == datetime(2024, 1, 1, tzinfo=UTC)
    assert isinstance(parse_receive_reply({"closed": True}), SessionClosed)
    with pytest.raises(KeyError):
        parse_receive_reply({"closed": False})


def test_the_server_refuses_unknown_fields_and_broken_constraints() -> None:
    with pytest.raises(ValidationError):
        server_reads(OutputRequest, {"value": 1, "idempotency_key": "k", "extra": 1})
    with pytest.raises(ValidationError):
        server_reads(OutputRequest, {"value": "x", "idempotency_key": ""})
    with pytest.raises(ValidationError):
        server_reads(ReceiveRequest, {"timeout": 0})
    with pytest.raises(ValidationError):
        server_reads(StopsRequest, {"turn_ids": [], "timeout": 1})
    with pytest.raises(ValidationError):
        server_reads(FailRequest, {"error": {"code": "", "message": "m"}})


def test_a_failure_is_cut_to_the_crd_limits_on_both_sides() -> None:
    built = ErrorInfo(code="c", message="x" * 40_000)
    parsed = server_reads(FailRequest, {"error": {"code": "c", "message": "x" * 40_000}}).error
    assert built == parsed
    assert len(built.message) < 40_000


def test_next_message_reply_may_be_empty() -> None:
    assert NextMessageReply.from_json({"message": None}).message is None
    reply = NextMessageReply.from_json({"message": {"id": "msg_1", "data": {"a": 1}}})
    assert reply.message is not None
    assert reply.message.data == {"a": 1}


def test_epoch_header_parses_by_its_wire_name() -> None:
    assert RunnerHeaders.model_validate({"Helmr-Process-Epoch": "3"}).process_epoch == 3


def test_builders_fill_the_patterns_the_server_routes() -> None:
    built = {
        routes.RECEIVE: routes.receive("ses_1"),
        routes.SESSION_OUTPUT: routes.session_output("ses_1"),
        routes.TURN_OUTPUT: routes.turn_output("ses_1", "turn_1"),
        routes.SESSION_OUTPUT_BATCH: routes.session_output_batch("ses_1"),
        routes.TURN_OUTPUT_BATCH: routes.turn_output_batch("ses_1", "turn_1"),
        routes.RELEASE: routes.release("ses_1", "turn_1"),
        routes.RESPOND: routes.respond("ses_1", "turn_1"),
        routes.COMPLETE: routes.complete("ses_1", "turn_1"),
        routes.FAIL: routes.fail("ses_1", "turn_1"),
        routes.MESSAGES_READY: routes.messages_ready("ses_1", "turn_1"),
        routes.MESSAGES_NEXT: routes.messages_next("ses_1", "turn_1"),
        routes.MESSAGE_OUTCOME: routes.message_outcome(
            "ses_1", "turn_1", "msg_1", MessageOutcome.REJECTED
        ),
    }
    assert len(set(built.values())) == len(built)
    for pattern, path in built.items():
        # aiohttp compiles the pattern exactly like this for the server's router.
        resource = web.DynamicResource(pattern)
        info = resource.get_info()
        assert info["pattern"].fullmatch(path), (pattern, path)
    assert built[routes.MESSAGE_OUTCOME] == (
        "/runner/v1/sessions/ses_1/turns/turn_1/messages/msg_1/rejected"
    )


def test_ids_cannot_change_the_path() -> None:
    assert routes.receive("a/../b") == "/runner/v1/sessions/a%2F..%2Fb/receive"
