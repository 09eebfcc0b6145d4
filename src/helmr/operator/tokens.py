"""Runner tokens: one bearer token per session, derived, never stored.

A token is HMAC-SHA256(key, session id), so it authorizes exactly one
session's runner routes and the control plane verifies it without a lookup.
The key lives in a file beside the timeline store (mode 0600), created on
first start, so tokens survive control-plane restarts with the store.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path


class RunnerTokens:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_file(cls, path: Path) -> RunnerTokens:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_EXCL: two processes starting together cannot both write a key.
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(secrets.token_bytes(32))
        return cls(path.read_bytes())

    def token_for(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()

    async def verify(self, session_id: str, token: str) -> bool:
        return hmac.compare_digest(self.token_for(session_id), token)
