"""A test actor whose code declares its settings and can cancel its own Session, for
Helmr's cluster tests (issue 27 item 5). Not an example.

Its ``actor(...)`` declares ``queue``, ``max_duration`` and ``ttl`` (the
manifest's ``queueLimit``, ``maxDurationSeconds`` and ``ttlSeconds``), which
apply where the Actor manifest is silent. Every receive tags its turn
``declared``. A turn whose input is ``{"cancel_session": true}`` cancels the
Session from inside the actor and lets go of the turn; any other is echoed
(result ``{"echo": input}``).
"""

from __future__ import annotations

from helmr.runner import Session, actor

QUEUE = 2
MAX_DURATION = 4
TTL = 5


async def run(session: Session) -> None:
    while (turn := await session.receive(tags=["declared"])) is not None:
        asked = turn.input if isinstance(turn.input, dict) else {}
        if asked.get("cancel_session"):
            await session.cancel()
            continue  # letting go of the turn: it ends interrupted (reason cancel)
        await turn.complete({"echo": turn.input})


declared = actor(id="declared", run=run, queue=QUEUE, max_duration=MAX_DURATION, ttl=TTL)
