"""The runner wire format: what each side can rely on when parsing the other."""

from __future__ import annotations

import pytest
from aiohttp import web
from pydantic import ValidationError

from helmr.protocol import (
    CompleteRequest,
    MessageOutcome,
    NextMessageReply,
    OutputRequest,
    RunnerHeaders,
    SessionClosed,
    TurnAssignment,
    parse_receive_reply,
    routes,
)


def test_complete_without_result_differs_from_complete_with_null() -> None:
    absent = CompleteRequest()
    null = CompleteRequest(result=None)

    assert absent.model_dump(mode="json", exclude_unset=True) == {}
    assert null.model_dump(mode="json", exclude_unset=True) == {"result": None}
    assert not absent.has_result
    assert null.has_result
    # The server sees the same distinction after parsing the JSON body.
    assert not CompleteRequest.model_validate({}).has_result
    assert CompleteRequest.model_validate({"result": None}).has_result


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
    assert isinstance(parse_receive_reply({"closed": True}), SessionClosed)
    with pytest.raises(ValidationError):
        parse_receive_reply({"closed": False})


def test_requests_refuse_unknown_fields_and_non_json_values() -> None:
    with pytest.raises(ValidationError):
        OutputRequest.model_validate({"value": 1, "idempotency_key": "k", "extra": 1})
    with pytest.raises(ValidationError):
        OutputRequest(value={1, 2}, idempotency_key="k")
    with pytest.raises(ValidationError):
        OutputRequest(value="x", idempotency_key="")


def test_next_message_reply_may_be_empty() -> None:
    assert NextMessageReply.model_validate({"message": None}).message is None
    reply = NextMessageReply.model_validate({"message": {"id": "msg_1", "data": {"a": 1}}})
    assert reply.message is not None
    assert reply.message.data == {"a": 1}


def test_epoch_header_parses_by_its_wire_name() -> None:
    assert RunnerHeaders.model_validate({"Helmr-Process-Epoch": "3"}).process_epoch == 3


def test_builders_fill_the_patterns_the_server_routes() -> None:
    built = {
        routes.RECEIVE: routes.receive("ses_1"),
        routes.SESSION_OUTPUT: routes.session_output("ses_1"),
        routes.TURN_OUTPUT: routes.turn_output("ses_1", "turn_1"),
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
