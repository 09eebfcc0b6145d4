"""The routes' order in the router: the per-Turn ones are tried first, which is safe
because no path matches two routes."""

from __future__ import annotations

import re

from helmr.protocol import routes
from helmr.protocol.api_routes import SESSION_TURNS
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
