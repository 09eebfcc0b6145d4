"""The control plane's settings, read once from the environment.

The Helm chart sets these (charts/helmr/templates/deployment.yaml); each has
a default that suits a local run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Settings:
    store_path: Path
    """The timeline store (SQLite); the runner-token key lives beside it."""
    listen_host: str
    api_port: int
    runner_port: int
    """Both ports serve the same app; a separate runner port lets a NetworkPolicy
    admit only runner pods to it."""
    runner_url: str
    """The URL runner pods reach this process at."""
    watch_namespaces: tuple[str, ...]
    """Empty: every namespace. Otherwise pods are listed per namespace (namespaced RBAC)."""
    history_retention: timedelta
    """The Environment's history retention: payloads and events older than this expire."""
    max_execution_losses: int
    stop_grace: timedelta
    """How long a runner process has to let go of an interrupted Turn before it is
    stopped and that counts as a process failure (``stop_deadline_elapsed``)."""
    max_request_bytes: int
    auth: str
    """``kubernetes`` (TokenReview + SubjectAccessReview) or ``static:<token>`` for development."""
    reconcile_interval: float
    """Seconds between supervisor passes when nothing wakes it sooner."""

    @property
    def token_key_path(self) -> Path:
        return self.store_path.parent / "runner-token.key"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        api_port = int(env.get("HELMR_API_PORT", "8080"))
        runner_port = int(env.get("HELMR_RUNNER_PORT", str(api_port)))
        namespaces = tuple(n for n in env.get("HELMR_WATCH_NAMESPACES", "").split(",") if n)
        return cls(
            store_path=Path(env.get("HELMR_STORE_PATH", "/var/lib/helmr/helmr.db")),
            listen_host=env.get("HELMR_LISTEN_HOST", "0.0.0.0"),
            api_port=api_port,
            runner_port=runner_port,
            runner_url=env.get("HELMR_RUNNER_URL", f"http://helmr.helmr-system.svc:{runner_port}"),
            watch_namespaces=namespaces,
            history_retention=timedelta(
                seconds=int(env.get("HELMR_HISTORY_RETENTION_SECONDS", str(30 * 24 * 3600)))
            ),
            max_execution_losses=int(env.get("HELMR_MAX_EXECUTION_LOSSES", "3")),
            stop_grace=timedelta(seconds=float(env.get("HELMR_STOP_GRACE_SECONDS", "10"))),
            max_request_bytes=int(env.get("HELMR_MAX_REQUEST_BYTES", str(1 << 20))),
            auth=env.get("HELMR_AUTH", "kubernetes"),
            reconcile_interval=float(env.get("HELMR_RECONCILE_INTERVAL", "1.0")),
        )
