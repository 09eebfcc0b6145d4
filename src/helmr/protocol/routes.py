"""Runner route patterns (for the server's router) and path builders (for the runner).

Patterns use aiohttp's ``{name}`` placeholders; each builder fills its
pattern, so the two can never disagree. All routes are ``POST``.
"""

from __future__ import annotations

from helmr.protocol.api_routes import fill
from helmr.states import MessageOutcome

PREFIX = "/runner/v1/sessions/{session_id}"
_TURN = PREFIX + "/turns/{turn_id}"

RECEIVE = PREFIX + "/receive"
STOPS = PREFIX + "/stops"
STORAGE = PREFIX + "/storage"
CANCEL = PREFIX + "/cancel"
SESSION_OUTPUT = PREFIX + "/output"
TURN_OUTPUT = _TURN + "/output"
RESPOND = _TURN + "/respond"
COMPLETE = _TURN + "/complete"
FAIL = _TURN + "/fail"
MESSAGES_READY = _TURN + "/messages/ready"
MESSAGES_NEXT = _TURN + "/messages/next"
MESSAGE_OUTCOME = _TURN + "/messages/{message_id}/{outcome}"


def receive(session_id: str) -> str:
    return fill(RECEIVE, session_id=session_id)


def stops(session_id: str) -> str:
    return fill(STOPS, session_id=session_id)


def storage(session_id: str) -> str:
    return fill(STORAGE, session_id=session_id)


def cancel(session_id: str) -> str:
    return fill(CANCEL, session_id=session_id)


def session_output(session_id: str) -> str:
    return fill(SESSION_OUTPUT, session_id=session_id)


def turn_output(session_id: str, turn_id: str) -> str:
    return fill(TURN_OUTPUT, session_id=session_id, turn_id=turn_id)


def respond(session_id: str, turn_id: str) -> str:
    return fill(RESPOND, session_id=session_id, turn_id=turn_id)


def complete(session_id: str, turn_id: str) -> str:
    return fill(COMPLETE, session_id=session_id, turn_id=turn_id)


def fail(session_id: str, turn_id: str) -> str:
    return fill(FAIL, session_id=session_id, turn_id=turn_id)


def messages_ready(session_id: str, turn_id: str) -> str:
    return fill(MESSAGES_READY, session_id=session_id, turn_id=turn_id)


def messages_next(session_id: str, turn_id: str) -> str:
    return fill(MESSAGES_NEXT, session_id=session_id, turn_id=turn_id)


def message_outcome(session_id: str, turn_id: str, message_id: str, outcome: MessageOutcome) -> str:
    return fill(
        MESSAGE_OUTCOME,
        session_id=session_id,
        turn_id=turn_id,
        message_id=message_id,
        outcome=outcome.value,
    )
