"""Binds the Session and Turn a request is about to its log lines (helmr.logs)."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from helmr import logs
from helmr.protocol.contract import EPOCH_HEADER


@web.middleware
async def log_context_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Lines logged while a request is handled name its path's session and turn, and,
    for a runner's call, the process epoch it claims (checked later by its guard)."""
    epoch = request.headers.get(EPOCH_HEADER, "")
    with logs.bound(
        session=request.match_info.get("session_id"),
        turn=request.match_info.get("turn_id"),
        # Only ASCII digits: str.isdigit also admits '²', which int() refuses.
        epoch=int(epoch) if epoch.isascii() and epoch.isdigit() else None,
    ):
        return await handler(request)
