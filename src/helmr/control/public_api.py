"""The Session verbs the public REST API calls, and the kopf adapters too (a
Session or Turn resource applied with kubectl is the same request), and what the
REST API alone asks: its long polls, sends, names and Workspaces.

Every method is a transaction function bound as a method
(:mod:`helmr.control.transaction`): its signature and docs are that function's.
"""

from __future__ import annotations

from functools import partial

from helmr.control import disks, forks, messages, sessions, turns
from helmr.control.surface import Surface
from helmr.control.transaction import reads, writes, writes_configured
from helmr.control.views import (
    load_session,
    load_session_name,
    load_turn,
    session_counts,
    session_names_not_ended,
)
from helmr.events import EventPage
from helmr.protocol.api import TurnView


class SessionControls(Surface):
    """What a Session's user asks, through the REST API or a resource."""

    open_session = writes(sessions.open_session)
    fork_session = writes(forks.fork)
    get_session = reads(load_session)
    get_turn = reads(load_turn)
    enqueue = writes(turns.enqueue)
    interrupt = writes_configured(sessions.interrupt)
    resume = writes(sessions.resume)
    cancel = writes(sessions.cancel)
    close = writes(sessions.close)
    get_workspace = reads(disks.workspace_view)
    require_unheld_workspace = reads(disks.require_unheld)
    # Whoever makes a Workspace's resource resets it if the store knew an older one of
    # its name: the API at a Session's start, else the Session's first start.
    workspace_known = reads(disks.workspace_known)
    reset_workspace = writes(disks.reset_workspace)

    async def list_events(self, session_id: str, after: int = 0, limit: int = 100) -> EventPage:
        """A page of the Session's timeline after ``after`` (InvalidInput on bad bounds)."""
        return await self._store.page(session_id, after, limit)


class PublicControl(SessionControls):
    """The public REST API's Control (every replica serves it, never fenced)."""

    get_session_name = reads(load_session_name)
    session_names_not_ended = reads(session_names_not_ended)
    enqueue_answering_session = writes(turns.enqueue_answering_session)
    send = writes(messages.send)
    get_message = reads(messages.load_message)
    forget_workspace = writes(disks.forget_workspace)
    session_counts = reads(session_counts)
    recovery_points = reads(disks.recovery_points)
    """The Session gauges of every replica's ``/metrics``."""

    async def wait_turn(
        self,
        session_id: str,
        turn_id: str,
        timeout: float,  # noqa: ASYNC109 (see _wait_for)
    ) -> TurnView:
        """The Turn once terminal, or as it is when ``timeout`` ends (the wait only)."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.get_turn, session_id, turn_id),
            lambda turn: turn.terminal,
        )

    async def wait_events(
        self,
        session_id: str,
        after: int = 0,
        timeout: float = 30.0,  # noqa: ASYNC109 (see _wait_for)
        limit: int = 100,
    ) -> EventPage:
        """The next page after ``after``, waiting up to ``timeout`` for one to exist."""
        return await self._wait_for(
            session_id,
            timeout,
            partial(self.list_events, session_id, after, limit),
            lambda page: bool(page.records),
        )
