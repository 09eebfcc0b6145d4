"""A test actor that tells which per-session settings reached it, without their values.

Its entrypoint is ``settings:settings`` (``tests/actors`` on ``PYTHONPATH``, as in the
local runner image). A turn's input is a list of environment variable names; its
result maps each to the SHA-256 of its value in ``os.environ`` (read in ``run``'s
turn, as docs/sdk.md asks), or null when it is unset: a test proves a Secret's value
reached the actor and then looks for the value itself everywhere else.
"""

from __future__ import annotations

import hashlib
import os

from helmr.runner import Session, actor


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def run(session: Session) -> None:
    while (turn := await session.receive()) is not None:
        names = turn.input if isinstance(turn.input, list) else []
        values = {str(name): os.environ.get(str(name)) for name in names}
        await turn.complete({name: None if v is None else digest(v) for name, v in values.items()})


settings = actor(id="settings", run=run)
