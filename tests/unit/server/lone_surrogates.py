"""Schemathesis hooks (``SCHEMATHESIS_HOOKS``) for the fuzz run with unstorable text.

Schemathesis draws only encodable text: its bodies never hold a lone UTF-16
surrogate, which JSON can escape (``"\\ud800"``) but no store can write. Here
every drawn body gets one, and the check says the API refused it (4xx).

Random path ids would be refused before any store write (unknown session), so
a drawn path names the Session and running Turn the test made
(``HELMR_FUZZ_SESSION``, ``HELMR_FUZZ_TURN``) instead.
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from hypothesis import strategies as st

LONE = "\udfff"

Path = tuple[str | int, ...]


def _string_paths(value: Any, path: Path = ()) -> list[Path]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _string_paths(item, (*path, i))]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _string_paths(item, (*path, key))]
    return []


def _with_lone_surrogate(body: Any, path: Path) -> Any:
    """A copy of ``body`` whose string at ``path`` ends with a lone surrogate."""
    if not path:
        return body + LONE
    copy = list(body) if isinstance(body, list) else dict(body)
    copy[path[0]] = _with_lone_surrogate(body[path[0]], path[1:])  # type: ignore[index]
    return copy


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return LONE in value
    if isinstance(value, list):
        return any(_holds_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    return False


@schemathesis.hook
def flatmap_body(ctx: Any, body: Any) -> st.SearchStrategy[Any]:
    """One string of the body, drawn, ends with a lone surrogate; a body with no
    string gets a key that is one. One only: the others stay valid, so the
    request reaches as far as the store."""
    paths = _string_paths(body)
    if paths:
        return st.sampled_from(paths).map(lambda path: _with_lone_surrogate(body, path))
    if isinstance(body, dict):
        return st.just({**body, LONE: 1})
    return st.just(body)


@schemathesis.hook
def map_path_parameters(ctx: Any, parameters: Any) -> Any:
    if parameters and "session_id" in parameters:
        parameters["session_id"] = os.environ["HELMR_FUZZ_SESSION"]
        if "turn_id" in parameters:
            parameters["turn_id"] = os.environ["HELMR_FUZZ_TURN"]
    return parameters


@schemathesis.check
def lone_surrogate_refused(ctx: Any, response: Any, case: Any) -> None:
    """A body holding a lone surrogate is never accepted, nor a server error."""
    if _holds_lone_surrogate(case.body) and not 400 <= response.status_code < 500:
        raise AssertionError(
            f"a body holding a lone surrogate was answered {response.status_code}, not a 4xx"
        )
