"""The actor SDK's Session in a runner process a test starts against the real app
(the ``api`` fixture), for the tests of runner routes end to end (no tests here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from helmr.protocol import EPOCH_HEADER, ActorSettings, contract
from helmr.runner import Session
from helmr.runner.transport import Transport
from tests.unit.api import Api


@asynccontextmanager
async def runner_session(
    api: Api,
    session_id: str,
    *,
    protocol: int = contract.PROTOCOL,
    epoch: int | None = None,
    settings: ActorSettings | None = None,
) -> AsyncIterator[Session]:
    """A new runner process of the session (the operator's part: its epoch and token)
    and the Session handle its actor gets; ``epoch`` overrides the one it calls with,
    ``settings`` are what its ``actor(...)`` declared."""
    headers = await api.runner(session_id)
    token = headers["Authorization"].removeprefix("Bearer ")
    async with Transport(
        api.url,
        session_id,
        lambda: token,
        int(headers[EPOCH_HEADER]) if epoch is None else epoch,
        on_fenced=lambda: None,
        retry_for=0,
    ) as transport:
        yield Session(transport, protocol=protocol, settings=settings)
