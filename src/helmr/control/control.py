"""``Control``: every side of the state machine in one object, for what drives
them all from one process (the tests, the benchmarks, a development server).

The control plane builds each side apart: :class:`ApiControl` for the APIs every
replica serves, :class:`~helmr.control.operator_api.OperatorControl` (fenced) for
the leader's work.
"""

from __future__ import annotations

from helmr.control.config import ControlConfig
from helmr.control.operator_api import OperatorControl
from helmr.control.public_api import PublicControl
from helmr.control.runner_api import RunnerControl
from helmr.control.transaction import Fence
from helmr.store import Store


class ApiControl(PublicControl, RunnerControl):
    """The public and runner APIs' Control, as every replica serves them (unfenced)."""


class Control(ApiControl, OperatorControl):
    def __init__(
        self, store: Store, config: ControlConfig | None = None, *, fence: Fence | None = None
    ) -> None:
        OperatorControl.__init__(self, store, config, fence=fence)
