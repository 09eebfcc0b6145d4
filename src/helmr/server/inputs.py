"""Reading a request's inputs into the declared models: pydantic models, or the
plain dataclasses of the runner protocol (``helmr.protocol.models``), which
pydantic validates just the same through a ``TypeAdapter``.

Every way a request can be malformed ends here as a 4xx ``HelmrError``:
415 for a body that is not JSON, 400 for JSON that does not parse, holds a
string that is not Unicode text or does not fit the model, 413 (raised by
aiohttp while reading) for an oversize body.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from helmr.errors import InvalidInput, UnsupportedMediaType
from helmr.server.errors import invalid
from helmr.server.exchange import Incoming

M = TypeVar("M")


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def adapter(model: type[M]) -> TypeAdapter[M]:
    """The validator and serializer of a declared model (built once per model)."""
    found = _ADAPTERS.get(model)
    if found is None:
        found = _ADAPTERS[model] = TypeAdapter(model)
    return found


class Input(Generic[M]):
    """A declared input's reader: its model's validator (built once, with the route, not
    looked up on every request) and where in the request it is read from, which a 400
    names."""

    __slots__ = ("_validate", "_where")

    def __init__(self, model: type[M], where: str) -> None:
        self._validate = adapter(model).validate_python
        self._where = where

    def parse(self, data: dict[str, Any]) -> M:
        try:
            parsed: M = self._validate(data)
            return parsed
        except ValidationError as e:
            raise invalid(e, self._where) from None


def parse(model: type[M], data: dict[str, Any], where: str) -> M:
    """``data`` read as ``model``, once (a route reads its inputs with an ``Input`` each)."""
    return Input(model, where).parse(data)


def query_of(request: Incoming) -> dict[str, str]:
    """The query as a plain dict; a repeated parameter is ambiguous, so it is refused."""
    params: dict[str, str] = {}
    for name, value in request.query.items():
        if name in params:
            raise InvalidInput(f"give query parameter {name!r} once")
        params[name] = value
    return params


@cache
def _header_names(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(field.alias or name for name, field in model.model_fields.items())


def headers_of(request: Incoming, model: type[BaseModel]) -> dict[str, str]:
    """The headers ``model`` declares (by alias), looked up case-insensitively."""
    headers = request.headers
    return {name: headers[name] for name in _header_names(model) if name in headers}


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# parse_constant: Python would accept NaN/Infinity, which no other JSON reader can
# read back from the timeline. One decoder for every body: json.loads with an
# argument builds a new one (and its scanner) on each call.
_JSON = json.JSONDecoder(parse_constant=_no_constants)


async def json_body(request: Incoming) -> dict[str, Any]:
    """The body as a JSON object; an empty body counts as ``{}``."""
    raw = await request.read()
    if not raw:
        return {}
    if request.content_type != "application/json" and not request.content_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"send the body as 'Content-Type: application/json', not {request.content_type!r}"
        )
    try:
        data = _JSON.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InvalidInput(f"the body is not valid UTF-8 JSON: {e}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object")
    if _SURROGATE_ESCAPE.search(raw):
        _refuse_lone_surrogates(data)
    return data


# Raw UTF-8 cannot encode a surrogate (decoding refuses it): only a \uD800 to
# \uDFFF escape makes one, so a body without such an escape is not walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds half a UTF-16 pair: the JSON parser joins whole
    pairs, so what is left is not Unicode and UTF-8 cannot encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refuse_lone_surrogates(data: dict[str, Any]) -> None:
    """400 naming where a string (or key) of the body is not Unicode text, which
    no store, log or JSON reader could take. Walked without recursion: the body
    may be nested as deep as the parser allows."""
    pending: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if _lone_surrogate(value):
                _refuse(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                if _lone_surrogate(key):
                    _refuse((*path, key))
                pending.append(((*path, key), item))
        elif isinstance(value, list):
            pending.extend(((*path, index), item) for index, item in enumerate(value))


def _refuse(path: tuple[str | int, ...]) -> None:
    # A key holding the surrogate is named escaped, so the reply is valid Unicode.
    names = [
        p if isinstance(p, int) else p.encode("utf-8", "backslashreplace").decode() for p in path
    ]
    where = "".join(f"[{n}]" if isinstance(n, int) else f".{n}" for n in names).lstrip(".")
    raise InvalidInput(
        f"fix the request body: {where}: a string holds half a UTF-16 surrogate pair,"
        " which is not Unicode text; escape characters outside the BMP as whole pairs",
        errors=[
            {
                "loc": ["body", *(str(n) for n in names)],
                "msg": "a lone UTF-16 surrogate is not Unicode text",
                "type": "lone_surrogate",
            }
        ],
    )
