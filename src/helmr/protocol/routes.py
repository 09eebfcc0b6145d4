"""Runner route patterns (for the server's router) and path builders (for the runner).

Patterns use aiohttp's ``{name}`` placeholders; each builder fills its
pattern, so the two can never disagree. All routes are ``POST``.
"""

from __future__ import annotations

from helmr.protocol.api_routes import fill, session_path, turn_path
from helmr.states import MessageOutcome

PREFIX = "/runner/v1/sessions/{session_id}"
ADOPTION = "/runner/v1/adoption"
"""A pooled runner's long poll for its Session (revision 4); the one runner route
without a Session."""
_TURN = PREFIX + "/turns/{turn_id}"

RECEIVE = PREFIX + "/receive"
STOPS = PREFIX + "/stops"
STORAGE = PREFIX + "/storage"
CANCEL = PREFIX + "/cancel"
SESSION_OUTPUT = PREFIX + "/output"
TURN_OUTPUT = _TURN + "/output"
SESSION_OUTPUT_BATCH = SESSION_OUTPUT + "/batch"
TURN_OUTPUT_BATCH = TURN_OUTPUT + "/batch"
RELEASE = _TURN + "/release"
RESPOND = _TURN + "/respond"
COMPLETE = _TURN + "/complete"
FAIL = _TURN + "/fail"
MESSAGES_READY = _TURN + "/messages/ready"
MESSAGES_NEXT = _TURN + "/messages/next"
MESSAGE_OUTCOME = _TURN + "/messages/{message_id}/{outcome}"


receive = session_path(RECEIVE)
stops = session_path(STOPS)
storage = session_path(STORAGE)
cancel = session_path(CANCEL)
session_output = session_path(SESSION_OUTPUT)
turn_output = turn_path(TURN_OUTPUT)
session_output_batch = session_path(SESSION_OUTPUT_BATCH)
turn_output_batch = turn_path(TURN_OUTPUT_BATCH)
release = turn_path(RELEASE)
respond = turn_path(RESPOND)
complete = turn_path(COMPLETE)
fail = turn_path(FAIL)
messages_ready = turn_path(MESSAGES_READY)
messages_next = turn_path(MESSAGES_NEXT)


def message_outcome(session_id: str, turn_id: str, message_id: str, outcome: MessageOutcome) -> str:
    return fill(
        MESSAGE_OUTCOME,
        session_id=session_id,
        turn_id=turn_id,
        message_id=message_id,
        outcome=outcome.value,
    )
