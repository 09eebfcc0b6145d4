"""History expiry: the store's retention period applied every minute, by the
leading replica (:mod:`helmr.operator.control_plane`) and by ``helmr dev``'s plane
alike (spec: payloads and events older than the Environment's retention expire)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from helmr.control.operator_api import OperatorControl

log = logging.getLogger(__name__)

EXPIRY_INTERVAL = 60.0
"""Seconds between expiry passes: retention is days, so a minute late is nothing."""


async def expire_history_periodically(
    control: OperatorControl, interval: float = EXPIRY_INTERVAL
) -> None:
    """Expires what the retention period has passed, every ``interval`` seconds, forever."""
    while True:
        await asyncio.sleep(interval)
        try:
            await control.expire_history(datetime.now(UTC))
        except Exception:
            log.exception("history expiry failed; retrying")
