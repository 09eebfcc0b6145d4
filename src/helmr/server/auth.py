"""Who may call the API: the interfaces the server authenticates through.

Public routes carry a Kubernetes bearer token; an ``Authenticator`` turns it
into a ``User`` and decides per namespace and verb (the real one is
``kube_auth.KubeAuthenticator``). Runner routes carry the runner process's
identity, checked by a ``RunnerTokenVerifier`` against the path's session and
the call's process epoch: in a cluster the operator's
``runners.identity.RunnerPodVerifier`` (the pod's projected service-account
token, reviewed by the apiserver).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from helmr.errors import Unauthenticated
from helmr.protocol.api_routes import PROXIED_AUTHORIZATION

# The Kubernetes verbs the public routes are authorised with, on a helmr.dev
# resource (``sessions``, ``workspaces``) in the namespace the call is about.
Verb = str
SESSIONS = "sessions"


@dataclass(frozen=True)
class User:
    """An authenticated caller, as TokenReview reports it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the token is unknown or expired."""

    async def authorize(
        self, user: User, namespace: str, verb: Verb, resource: str = SESSIONS
    ) -> bool:
        """Whether ``user`` may ``verb`` the helmr.dev ``resource`` in ``namespace``."""


class RunnerTokenVerifier(Protocol):
    async def verify(self, session_id: str, epoch: int, token: str) -> bool:
        """Whether ``token`` is the identity of process ``epoch`` of exactly
        ``session_id`` (False: 403). Raises ``Unauthenticated`` (401) when it is
        no runner's token at all (unknown, expired, or its pod is gone)."""


@dataclass(frozen=True)
class Grant:
    """What a static token may do: verbs per namespace (``"*"`` matches any)."""

    user: User
    namespaces: frozenset[str] = frozenset({"*"})
    verbs: frozenset[Verb] = frozenset({"*"})


class StaticAuthenticator:
    """Fixed tokens for tests and local development; never for a cluster."""

    def __init__(self, grants: Mapping[str, Grant]) -> None:
        self._grants = dict(grants)

    async def authenticate(self, token: str) -> User | None:
        for known, grant in self._grants.items():
            # Constant time, so a wrong token leaks nothing about a right one.
            if hmac.compare_digest(known.encode(), token.encode()):
                return grant.user
        return None

    async def authorize(
        self, user: User, namespace: str, verb: Verb, resource: str = SESSIONS
    ) -> bool:
        # Static grants are per namespace and verb, for every resource.
        return any(
            g.user == user
            and ("*" in g.namespaces or namespace in g.namespaces)
            and ("*" in g.verbs or verb in g.verbs)
            for g in self._grants.values()
        )


class StaticRunnerTokens:
    """Runner tokens held in memory (tests, development): session id → token, the
    same for every epoch of the session (fencing by epoch is Control's)."""

    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self._tokens = dict(tokens or {})

    def issue(self, session_id: str, token: str) -> None:
        self._tokens[session_id] = token

    async def verify(self, session_id: str, epoch: int, token: str) -> bool:
        known = self._tokens.get(session_id)
        return known is not None and hmac.compare_digest(known.encode(), token.encode())


def bearer_token(headers: Mapping[str, str]) -> str:
    """The bearer token of a request's ``headers``; 401 when there is none.

    ``Authorization`` first; else ``PROXIED_AUTHORIZATION``, which the
    apiserver's Service proxy passes on (it strips ``Authorization``)."""
    header = headers.get("Authorization") or headers.get(PROXIED_AUTHORIZATION)
    scheme, _, token = (header or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated(
            "send 'Authorization: Bearer <token>' (a Kubernetes token for /v1, "
            "the session's runner token for /runner/v1)"
        )
    return token
