"""The async Helmr client, used outside an actor (HTTP only)::

    from helmr.client import Client

    async with Client("https://helmr.example", token) as client:
        session, run = await client.actors.start("reviewer", namespace="team-a",
                                                 workspace="repo-42")
        turn = await session.enqueue({"issue": "APP-42"}, idempotency_key="linear:123")
        async for record in session.events.stream(after=0):
            ...
        outcome = await turn.wait(timeout=60)

Server errors are raised as ``helmr.errors`` classes (``NotFound``,
``TurnNotActive``, ...); connection failures as ``aiohttp.ClientError``.
"""

from helmr.client.client import Actors, Client, Started
from helmr.client.models import Hold, Message, Run, Session, StopReceipt, Turn, TurnError
from helmr.client.sessions import Sent, SessionEvents, SessionRef, Sessions, TurnRef
from helmr.client.workspaces import Workspace, WorkspaceRef, Workspaces
from helmr.events import (
    Event,
    EventKind,
    EventPage,
    SessionEvent,
    SessionEventKind,
    SessionEventPage,
)
from helmr.protocol.api_requests import SecretKey, SecretSource

__all__ = [
    "Actors",
    "Client",
    "Event",
    "EventKind",
    "EventPage",
    "Hold",
    "Message",
    "Run",
    "SecretKey",
    "SecretSource",
    "Sent",
    "Session",
    "SessionEvent",
    "SessionEventKind",
    "SessionEventPage",
    "SessionEvents",
    "SessionRef",
    "Sessions",
    "Started",
    "StopReceipt",
    "Turn",
    "TurnError",
    "TurnRef",
    "Workspace",
    "WorkspaceRef",
    "Workspaces",
]
