"""Field constraints for plain dataclasses, applied where pydantic validates them.

The runner protocol's bodies (``helmr.protocol.models``) and the few types they
share with the rest of Helmr are standard-library dataclasses, so that the
runner, which only builds and reads them, starts without importing pydantic.
The server and the client validate and document them with pydantic all the
same: a field annotated ``Annotated[float, Constraint(gt=0)]`` gets exactly
what ``pydantic.Field(gt=0)`` would give it (validation and JSON schema), and
pydantic is imported only there, when it asks.

Standard library only (``tests/unit/runner/test_imports.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema


class Constraint:
    """``Annotated`` metadata holding ``pydantic.Field`` arguments (``gt``, ``ge``,
    ``min_length``, ``max_length``, ``description``)."""

    def __init__(self, **field: Any) -> None:
        self.field = field

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic import Field  # only where pydantic validates: never in the runner

        return handler(Annotated[source, Field(**self.field)])


NO_NUL = r"^[^\x00]*$"
"""The pattern of text the store keeps as a column or looks up by (keys, ids,
reasons): no NUL character, which PostgreSQL's text cannot hold. JSON payloads
may hold NUL: the store keeps it escaped in their JSON text."""
