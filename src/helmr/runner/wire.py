"""Building protocol requests from actor values, with errors an actor author can act on."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from helmr.errors import InvalidInput

M = TypeVar("M", bound=BaseModel)


def request(model: type[M], **fields: Any) -> M:
    """``model(**fields)``; a value that is not JSON raises ``InvalidInput`` at the caller."""
    try:
        return model(**fields)
    except ValidationError as e:
        # Without the input: an actor's value may be large or sensitive.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            for err in e.errors(include_url=False, include_input=False)
        )
        raise InvalidInput(f"{model.__name__}: {problems}") from None
