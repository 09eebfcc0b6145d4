"""The loops ``ControlPlane.stop`` (and ``helmr dev``'s stop) cancel end when
cancelled, even when the wake-up they wait for comes in the same instant.

On Python 3.11, ``asyncio.wait_for`` returns the result of a wait that ended as
it was cancelled, and the cancellation is lost: the loop runs on, and the
leader's TaskGroup, which cancels its tasks once, waits for it for ever (the
hang 77a1bc9 worked around in ``helmr dev``). The waits use ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio

import pytest

from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.store.signals import Signals
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube

HANG = 10.0
"""Seconds after which a task that has not ended is taken to hang (it ends at once)."""


async def test_the_supervisor_ends_when_cancelled_as_it_is_woken(h: Harness) -> None:
    settings = Settings(reconcile_interval=60.0)
    supervisor = Supervisor(h.control, StubKube(), RunnerPods(), settings, OperatorMetrics())
    task = asyncio.create_task(supervisor.run())
    while not supervisor._wake._waiters:  # noqa: ASYNC110 (its first pass over, it waits)
        await asyncio.sleep(0.01)

    supervisor.wake()
    task.cancel()

    await asyncio.wait([task], timeout=HANG)
    assert task.cancelled()


async def test_the_change_feed_wait_ends_when_cancelled_as_a_change_comes() -> None:
    signals = Signals()
    task = asyncio.create_task(signals.changed(timeout=60.0))
    await asyncio.sleep(0.01)

    signals.publish(["ses_1"])
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG)
