"""Public REST route patterns (for the server's router) and path builders (for the client).

Patterns use aiohttp's ``{name}`` placeholders; each builder fills its
pattern, so the server's routes and the client's requests cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

ACTOR_SESSIONS = "/v1/namespaces/{namespace}/actors/{actor}/sessions"
SESSION = "/v1/sessions/{session_id}"
SESSION_TURNS = SESSION + "/turns"
SESSION_SEND = SESSION + "/send"
SESSION_INTERRUPT = SESSION + "/interrupt"
SESSION_RESUME = SESSION + "/resume"
SESSION_CANCEL = SESSION + "/cancel"
SESSION_CLOSE = SESSION + "/close"
SESSION_FORK = SESSION + "/fork"
EVENTS = SESSION + "/events"
EVENTS_STREAM = EVENTS + "/stream"
TURN = SESSION_TURNS + "/{turn_id}"
TURN_WAIT = TURN + "/wait"
TURN_SEND = TURN + "/send"
TURN_INTERRUPT = TURN + "/interrupt"
WORKSPACE = "/v1/namespaces/{namespace}/workspaces/{workspace}"

PROXIED_AUTHORIZATION = "X-Helmr-Authorization"
"""Where a caller reaching the API through the apiserver's Service proxy puts
``Bearer <token>``: the apiserver consumes ``Authorization`` itself (it removes
the header once it has authenticated the request), so it never reaches Helmr."""

STREAM_MEDIA_TYPE = "text/event-stream"
"""What ``EVENTS_STREAM`` answers: server-sent events, one a record (its ``id`` the
record's sequence), then ``STREAM_END_EVENT`` once the session has ended."""
STREAM_END_EVENT = "end"
STREAM_RETENTION_EVENT = "retention"
"""The event that says the stream's cursor is below the retention boundary: the
records after the cursor up to ``retained_after`` are gone (history retention),
and the stream goes on after the boundary. Its ``id`` is the boundary, so a
reconnect resumes after it instead of being told again."""
STREAM_KEEPALIVE = 15.0
"""Seconds between the stream's keepalive comments (the server's default)."""


def fill(pattern: str, **segments: str) -> str:
    """``pattern`` with each ``{name}`` replaced by its segment.

    Ids are opaque to the caller: each is quoted, so none can change the path.
    """
    return pattern.format(**{k: quote(v, safe="") for k, v in segments.items()})


def session_path(pattern: str) -> Callable[[str], str]:
    """The builder of ``pattern``, a path of one session: ``(session_id) -> path``."""

    def path(session_id: str) -> str:
        return fill(pattern, session_id=session_id)

    return path


def turn_path(pattern: str) -> Callable[[str, str], str]:
    """The builder of ``pattern``, a path of one turn: ``(session_id, turn_id) -> path``."""

    def path(session_id: str, turn_id: str) -> str:
        return fill(pattern, session_id=session_id, turn_id=turn_id)

    return path


def actor_sessions(namespace: str, actor: str) -> str:
    return fill(ACTOR_SESSIONS, namespace=namespace, actor=actor)


session = session_path(SESSION)
session_turns = session_path(SESSION_TURNS)
session_send = session_path(SESSION_SEND)
session_interrupt = session_path(SESSION_INTERRUPT)
session_resume = session_path(SESSION_RESUME)
session_cancel = session_path(SESSION_CANCEL)
session_close = session_path(SESSION_CLOSE)
session_fork = session_path(SESSION_FORK)
events = session_path(EVENTS)
events_stream = session_path(EVENTS_STREAM)
turn = turn_path(TURN)
turn_wait = turn_path(TURN_WAIT)
turn_send = turn_path(TURN_SEND)
turn_interrupt = turn_path(TURN_INTERRUPT)


def workspace(namespace: str, name: str) -> str:
    return fill(WORKSPACE, namespace=namespace, workspace=name)
