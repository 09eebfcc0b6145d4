"""The Session/Turn state machine over the timeline store (plain async code, no Kubernetes).

Placeholder docstring; replaced with the full API below once settled.
"""

from helmr.control.config import ControlConfig
from helmr.control.control import REPORTED_KINDS, Control
from helmr.control.views import (
    NO_RESULT,
    HoldView,
    MessageView,
    NoResult,
    ProcessOutcome,
    ProcessStop,
    SendResult,
    SessionView,
    StopReceipt,
    TurnView,
)

__all__ = [
    "NO_RESULT",
    "REPORTED_KINDS",
    "Control",
    "ControlConfig",
    "HoldView",
    "MessageView",
    "NoResult",
    "ProcessOutcome",
    "ProcessStop",
    "SendResult",
    "SessionView",
    "StopReceipt",
    "TurnView",
]
