"""The routes' order in the router: the per-Turn ones are tried first, which is safe
because no path matches two routes. A runner call's headers are parsed once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from helmr.protocol import routes
from helmr.protocol.api_requests import RunnerHeaders
from helmr.protocol.api_routes import SESSION_TURNS
from helmr.server.inputs import Input
from tests.unit.api import Api


def _patterns(api: Api) -> list[tuple[str, re.Pattern[str]]]:
    """Each resource's template and the expression aiohttp matches paths with, in the
    order aiohttp tries them."""
    found = []
    for resource in api.app.router.resources():
        info = resource.get_info()
        pattern = info.get("pattern") or re.compile(re.escape(info["path"]))
        found.append((resource.canonical, pattern))
    return found


def test_no_path_matches_two_routes(api: Api) -> None:
    patterns = _patterns(api)
    for template, _ in patterns:
        path = re.sub(r"\{[^}]+\}", "x", template)
        # A template with two methods may be two resources (aiohttp's choice).
        matching = {other for other, pattern in patterns if pattern.fullmatch(path)}
        assert matching == {template}


def test_the_routes_every_turn_calls_are_tried_first(api: Api) -> None:
    order = [template for template, _ in _patterns(api)]
    first = {SESSION_TURNS, routes.RECEIVE, routes.COMPLETE, routes.FAIL}
    assert first <= set(order[: len(first) + 2]), order


def test_a_runner_s_settlement_is_the_first_runner_route_tried(api: Api) -> None:
    """From revision 5 a looping runner's one request a Turn is its settlement (holding
    its next receive): the router tries it before any other route of its prefix."""
    runner = [t for t, _ in _patterns(api) if t.startswith(routes.PREFIX.partition("{")[0])]
    assert runner[:4] == [routes.COMPLETE, routes.FAIL, routes.TURN_OUTPUT_BATCH, routes.RECEIVE]


async def test_a_runner_calls_epoch_header_is_parsed_once(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard parses it to check the runner token's epoch; the handler takes that."""
    session = await api.start()
    await api.enqueue(session)
    parsed: list[object] = []
    parse = Input.parse

    def counted(self: Input[object], data: dict[str, Any]) -> object:
        read = parse(self, data)
        if isinstance(read, RunnerHeaders):
            parsed.append(read)
        return read

    monkeypatch.setattr(Input, "parse", counted)
    turn, runner = await api.run_turn(session)
    await api.call("POST", routes.complete(session, turn), headers=runner, json={})
    assert len(parsed) == 2  # the receive's, the complete's
