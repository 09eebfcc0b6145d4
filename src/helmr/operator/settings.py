"""The control plane's settings, read once from the environment.

The Helm chart sets these; each has a default that suits a local run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    """Holds the timeline store (SQLite) and the runner-token key."""
    listen_host: str
    port: int
    """One aiohttp server serves the public API (/v1) and the runner API (/runner/v1)."""
    runner_url: str
    """The URL runner pods reach this process at."""
    history_retention: timedelta
    """The Environment's history retention: payloads and events older than this expire."""
    auth: str
    """``kubernetes`` (TokenReview + SubjectAccessReview) or ``static:<token>`` for development."""
    reconcile_interval: float
    """Seconds between supervisor passes when nothing wakes it sooner."""

    @property
    def store_path(self) -> Path:
        return self.data_dir / "timeline.db"

    @property
    def token_key_path(self) -> Path:
        return self.data_dir / "runner-token.key"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        port = int(env.get("HELMR_PORT", "8080"))
        return cls(
            data_dir=Path(env.get("HELMR_DATA_DIR", "/var/lib/helmr")),
            listen_host=env.get("HELMR_LISTEN_HOST", "0.0.0.0"),
            port=port,
            runner_url=env.get("HELMR_RUNNER_URL", f"http://helmr.helmr-system.svc:{port}"),
            history_retention=timedelta(
                seconds=int(env.get("HELMR_HISTORY_RETENTION_SECONDS", str(7 * 24 * 3600)))
            ),
            auth=env.get("HELMR_AUTH", "kubernetes"),
            reconcile_interval=float(env.get("HELMR_RECONCILE_INTERVAL", "1.0")),
        )
