"""The actor SDK: what an actor's code imports inside its runner pod.

::

    from helmr.runner import Session, actor

    async def run(session: Session) -> None:
        while (turn := await session.receive()) is not None:
            await turn.output.write({"received": turn.input})
            await turn.complete()

    reviewer = actor(id="reviewer", run=run)

``python -m helmr.runner`` runs the actor that ``HELMR_ENTRYPOINT`` names.
See docs/sdk.md.
"""

from helmr.errors import MessageRejected, ReceiveTimeout, TurnNotActive
from helmr.protocol import Message
from helmr.runner.actor import Actor, actor
from helmr.runner.messages import MessageHandler
from helmr.runner.output import Output
from helmr.runner.session import Session
from helmr.runner.signal import Signal
from helmr.runner.turn import Turn

__all__ = [
    "Actor",
    "Message",
    "MessageHandler",
    "MessageRejected",
    "Output",
    "ReceiveTimeout",
    "Session",
    "Signal",
    "Turn",
    "TurnNotActive",
    "actor",
]
