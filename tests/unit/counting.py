"""A store connection that keeps the statements run through it, for tests that
hold a transaction to its budget of round trips."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class CountingConnection:
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self.statements.append(sql)
        return self.conn.execute(sql, parameters)
