"""Binds the Session and Turn a request is about to its log lines (helmr.logs)."""

from __future__ import annotations

from helmr import logs
from helmr.protocol.contract import EPOCH_HEADER
from helmr.server.exchange import Incoming


def bind_request(request: Incoming) -> None:
    """Lines logged while ``request`` is handled name its path's session and turn, and,
    for a runner's call, the process epoch it claims (checked later by its guard).

    Bound for the rest of the task, not a ``with`` block: each request is handled in a
    task of its own, whose context is a copy (aiohttp's: "a new task is used for copy
    context vars"; the runner server's likewise), so nothing bound here outlives the
    request, and a waiting long poll keeps no context manager
    (``bench_long_poll_memory.py``)."""
    epoch = request.headers.get(EPOCH_HEADER, "")
    match = request.match_info
    logs.bind_about(
        match.get("session_id"),
        match.get("turn_id"),
        # Only ASCII digits: str.isdigit also admits '²', which int() refuses.
        int(epoch) if epoch.isascii() and epoch.isdigit() else None,
    )
