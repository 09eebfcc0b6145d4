"""The pytest plugin of ``helmr.testing`` (entry point ``helmr``): its fixtures.

pytest loads it wherever Helmr is installed, so it imports the dev plane only
when a test asks for a fixture, and offers none without pytest-asyncio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from helmr.testing.plane import Plane, StartPlane


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - without it, no async fixtures
    pass
else:

    @pytest_asyncio.fixture
    async def helmr_dev(tmp_path: Path) -> AsyncIterator[StartPlane]:
        """Starts dev planes for the test (``await helmr_dev("examples/echo", spec=...)``),
        each in a directory of the test's ``tmp_path``; all are stopped after it."""
        from helmr.testing.plane import start_plane

        async with AsyncExitStack() as stack:
            made = 0

            async def start(actor: str, **options: Any) -> Plane:
                nonlocal made
                made += 1
                root = tmp_path / f"helmr-{made}"
                return await stack.enter_async_context(start_plane(actor, root, **options))

            yield start

    @pytest_asyncio.fixture
    async def helmr_plane(helmr_dev: StartPlane, helmr_actor: str) -> Plane:
        """A dev plane running ``helmr_actor``, with the Actor's own settings."""
        return await helmr_dev(helmr_actor)


@pytest.fixture
def helmr_actor() -> str:
    """The actor ``helmr_plane`` runs: define this fixture (a directory with
    ``actor.yaml``, or ``MODULE:ATTR``) in the test module or a conftest."""
    raise pytest.UsageError("define a helmr_actor fixture returning the actor to run")
