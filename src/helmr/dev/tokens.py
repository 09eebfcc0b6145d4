"""Runner identity without a cluster: a random token per process epoch, in a file.

A runner pod's token is its projected service-account token, a file the runner
reads for every call (``HELMR_TOKEN_FILE``). A local runner process gets the same:
a file holding a token minted for its Session's epoch, readable by its user only.
The runner API accepts a token for that Session and epoch alone, as it accepts a
pod's token only from the pod made for that epoch (``Control`` fences older epochs).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


class RunnerTokens:
    """``RunnerTokenVerifier`` of the tokens it minted, one per (Session, epoch)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._tokens: dict[tuple[str, int], str] = {}

    def mint(self, session_id: str, epoch: int) -> Path:
        """A new token for the Session's process ``epoch``, written to the file returned."""
        token = secrets.token_urlsafe(32)
        self._tokens[(session_id, epoch)] = token
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{session_id}-{epoch}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(token)
        return path

    def revoke(self, session_id: str, epoch: int) -> None:
        """The process ended: its token is good for nothing any more."""
        self._tokens.pop((session_id, epoch), None)
        (self.directory / f"{session_id}-{epoch}").unlink(missing_ok=True)

    async def verify(self, session_id: str, epoch: int, token: str) -> bool:
        minted = self._tokens.get((session_id, epoch))
        return minted is not None and secrets.compare_digest(minted, token)
