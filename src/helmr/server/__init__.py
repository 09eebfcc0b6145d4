"""The Helmr API server (aiohttp): ``build_app(control, authenticator, runner_tokens)``.

- ``/v1/...``: the public REST API (Kubernetes bearer tokens, authorised per
  namespace on ``sessions.helmr.dev``), documented in ``docs/api.md``;
- ``/runner/v1/...``: the runner protocol (``helmr.protocol``), per-session tokens;
  on a port of its own served by ``app[RUNNER_SERVER]`` (``runner_server``);
- ``/openapi.json``, ``/healthz``, ``/readyz``, ``/metrics``.

``kube_auth.KubeAuthenticator`` is the in-cluster ``Authenticator``; it needs
the ``operator`` extra and is imported from its module, not from here.
"""

from helmr.server.app import RUNNER_SERVER, build_app
from helmr.server.auth import (
    Authenticator,
    Grant,
    RunnerTokenVerifier,
    StaticAuthenticator,
    StaticRunnerTokens,
    User,
)
from helmr.server.listen import app_runner, listen
from helmr.server.public import Mirror
from helmr.server.session_names import SessionNames

__all__ = [
    "RUNNER_SERVER",
    "Authenticator",
    "Grant",
    "Mirror",
    "RunnerTokenVerifier",
    "SessionNames",
    "StaticAuthenticator",
    "StaticRunnerTokens",
    "User",
    "app_runner",
    "build_app",
    "listen",
]
