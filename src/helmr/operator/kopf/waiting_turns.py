"""Turns applied with kubectl before their Session exists, remembered so the
Session's admission admits them at once.

kopf asks again for such a Turn at growing intervals, up to
``MISSING_SESSION_MAX_DELAY`` (30 s) apart (``missing_session_delay``), so a
Session created a few seconds after its Turn would otherwise leave the Turn
waiting for the next ask. kopf's asks stay the fallback: this registry is this
process's memory, empty after a restart until the resumed Turns ask again.
"""

from __future__ import annotations


class WaitingTurns:
    """The Turns waiting for each Session, by ``(namespace, Session name)``: each
    Turn's name and uid (a Turn deleted and applied again under its name is
    another Turn, admitted by its own handler)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], dict[str, str]] = {}

    def wait(self, namespace: str, session: str, turn: str, uid: str) -> None:
        """``turn`` names ``session``, which does not exist yet."""
        self._waiting.setdefault((namespace, session), {})[turn] = uid

    def found(self, namespace: str, session: str, turn: str) -> None:
        """``turn`` found its Session by itself (kopf's ask): no longer waiting."""
        waiting = self._waiting.get((namespace, session))
        if waiting is not None:
            waiting.pop(turn, None)
            if not waiting:
                del self._waiting[(namespace, session)]

    def take(self, namespace: str, session: str) -> dict[str, str]:
        """The Turns waiting for ``session`` (name to uid), forgotten here: its
        admission admits them now."""
        return self._waiting.pop((namespace, session), {})
