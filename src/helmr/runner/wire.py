"""Building protocol requests from actor values, with errors an actor author can act on."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from helmr.errors import InvalidInput
from helmr.protocol import to_json

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

M = TypeVar("M", bound="DataclassInstance")


def request(model: Callable[..., M], **fields: Any) -> M:
    """``model(**fields)``; a value that is not JSON raises ``InvalidInput`` at the caller,
    before anything is sent."""
    body = model(**fields)
    for name, value in to_json(body).items():
        try:
            # allow_nan=False: the server refuses NaN and Infinity, which JSON does not have.
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as e:
            # Without the value: an actor's value may be large or sensitive.
            raise InvalidInput(f"{type(body).__name__}.{name} is not JSON: {e}") from None
    return body
