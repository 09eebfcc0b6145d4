"""The actor SDK's Session in a runner process a test starts against the real app
(the ``api`` fixture), for the tests of runner routes end to end (no tests here)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from helmr.protocol import EPOCH_HEADER, ActorSettings, contract
from helmr.runner import Session
from helmr.runner.http import Heard
from helmr.runner.transport import Transport
from tests.unit.api import Api

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class RecordingTransport(Transport):
    """A Transport that notes the path of every call it sends (``sent``)."""

    sent: list[str]

    async def call(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        self.sent.append(_route(path))
        return await super().call(path, body, wait=wait, heard=heard)


def _route(path: str) -> str:
    """``.../sessions/{sid}/turns/{tid}/output/batch`` → ``output/batch``: the route
    after the session's (and turn's) ids."""
    rest = path.split("/sessions/", 1)[1].split("/", 1)[1]
    return rest.split("/", 2)[2] if rest.startswith("turns/") else rest


@asynccontextmanager
async def runner_session(
    api: Api,
    session_id: str,
    *,
    protocol: int = contract.PROTOCOL,
    epoch: int | None = None,
    settings: ActorSettings | None = None,
    sent: list[str] | None = None,
    idle_timeout: float | None = None,
    transport_type: type[RecordingTransport] = RecordingTransport,
) -> AsyncIterator[Session]:
    """A new runner process of the session (the operator's part: its epoch and token)
    and the Session handle its actor gets; ``epoch`` overrides the one it calls with,
    ``settings`` are what its ``actor(...)`` declared, ``idle_timeout`` its warm wait;
    ``sent`` gets the route of every call the process makes (``receive``,
    ``complete``, ``output/batch``...); ``transport_type`` may stand in for the wire.
    Its end gives back what the process would (``Session.give_back``)."""
    headers = await api.runner(session_id)
    token = headers["Authorization"].removeprefix("Bearer ")
    transport = transport_type(
        api.runner_url,
        session_id,
        lambda: token,
        int(headers[EPOCH_HEADER]) if epoch is None else epoch,
        on_fenced=lambda: None,
        retry_for=0,
    )
    transport.sent = [] if sent is None else sent
    async with transport:
        session = Session(
            transport, protocol=protocol, settings=settings, idle_timeout=idle_timeout
        )
        yield session
        # As the process ends (the entrypoint's ``_serve``): a turn a settlement started,
        # or a settlement's reply still held, is given back.
        session.ask_no_more()
        await session.give_back()


async def answered(api: Api) -> Counter[str]:
    """The requests the app has answered (``/metrics``'s aside), by route template,
    from its ``helmr_api_requests_total``."""
    async with api.http.get("/metrics") as response:
        text = await response.text()
    counted: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            route = sample.labels.get("route", "")
            if sample.name == "helmr_api_requests_total" and route != "/metrics":
                counted[route] += int(sample.value)
    return counted
