"""What the client returns: the REST API's views, ``helmr.protocol.api``'s models.

The server sends exactly these models, so the client parses them as they are,
under its own short names. They ignore fields they do not know, so a client
keeps working against a newer server; a turn's ``error`` is the runner
protocol's ``ErrorInfo``, which does not. ``Turn`` adds the one client-side
convenience: every turn the client returns, read or waited for, has
``timeout``. Events and pages are ``helmr.events``' own models.
"""

from __future__ import annotations

from helmr.protocol import ErrorInfo
from helmr.protocol.api import (
    HoldView,
    MessageView,
    RunView,
    SendResult,
    SessionView,
    StartResult,
    StopReceipt,
    TurnWaitView,
)

Session = SessionView
Hold = HoldView
Message = MessageView
Run = RunView
TurnError = ErrorInfo

__all__ = ["Hold", "Message", "Run", "Session", "StartResult", "StopReceipt", "Turn", "TurnError"]


class Turn(TurnWaitView):
    """A turn's status and outcome, as read or waited for.

    ``timeout`` is true only when ``wait`` returned because its timeout
    elapsed: that ends the wait, not the turn. A read has no timeout (false).
    """

    timeout: bool = False


class _SendReply(SendResult):
    turn: Turn
