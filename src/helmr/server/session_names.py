"""Where each Session is (its namespace and name), kept by the API.

They never change once a Session opens, so each is read once: every Session
open or closing in one read as the process starts (:meth:`SessionNames.load`),
before it listens, then any other as it is first asked for. A restarted
process is asked at once, by every runner reconnecting (its token is checked
against the Session's name) and by every enqueue (authorised in the Session's
namespace): without them kept, 5,000 runners cost 5,000 reads, queued ahead
of the first enqueue's own.
"""

from __future__ import annotations

from helmr.control import SessionName
from helmr.control.public_api import PublicControl

KEPT = 16_384
"""Sessions whose name is kept (the earliest kept is forgotten first): about
200 bytes each."""


class SessionNames:
    def __init__(self, control: PublicControl, kept: int = KEPT) -> None:
        self._control = control
        self._kept = kept
        self._names: dict[str, SessionName] = {}

    async def load(self) -> None:
        """Keeps the names of the newest Sessions open or closing, in one read."""
        loaded = await self._control.session_names_not_ended(self._kept)
        for session_id, name in reversed(loaded.items()):  # the newest kept longest
            self.remember(session_id, name)

    async def __call__(self, session_id: str) -> SessionName:
        """Where the Session is (NotFound if there is none)."""
        name = self._names.get(session_id)
        if name is None:
            name = await self._control.get_session_name(session_id)
            self.remember(session_id, name)
        return name

    def remember(self, session_id: str, name: SessionName) -> None:
        if session_id not in self._names and len(self._names) >= self._kept:
            del self._names[next(iter(self._names))]
        self._names[session_id] = name
