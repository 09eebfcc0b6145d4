"""The runner port's server on both event loops (``tests.unit.loops``)."""

from __future__ import annotations

import pytest
from pytest_asyncio.plugin import LoopFactory

from tests.unit.loops import BOTH


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, LoopFactory]:
    return BOTH
