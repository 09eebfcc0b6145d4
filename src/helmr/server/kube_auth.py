"""Authenticating public API calls against Kubernetes: TokenReview + SubjectAccessReview.

The Kubernetes client is synchronous, so every review runs in a worker thread
(on a :mod:`helmr.kube.threads` lane): the operator and the API share one event loop,
which must never block on the apiserver. Positive answers are cached briefly, as the
apiserver's own webhook authenticator does, so that a busy client does not
cost two reviews per request; denials are never cached, so a new RoleBinding
takes effect at once. A token's review may also be trusted only until the token
expires (``until_expiry``: its JWT ``exp``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from helmr.kube import threads as kube_threads
from helmr.kube.reviews import Reviewed, Reviews
from helmr.server.auth import SESSIONS, User, Verb

if TYPE_CHECKING:
    from helmr.kube.client import ApiClient

GROUP = "helmr.dev"


class _TTLCache:
    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._entries: dict[Hashable, tuple[float, object]] = {}

    def get(self, key: Hashable) -> object | None:
        hit = self._entries.get(key)
        if hit is None or hit[0] < time.monotonic():
            self._entries.pop(key, None)
            return None
        return hit[1]

    def put(self, key: Hashable, value: object, lasts: float | None = None) -> None:
        """Keeps ``value`` for the cache's ttl, or for ``lasts`` seconds if that is shorter."""
        ttl = self._ttl if lasts is None else min(self._ttl, lasts)
        if ttl <= 0:
            return
        now = time.monotonic()
        if len(self._entries) > 10_000:  # bound memory under many distinct tokens
            self._entries = {k: v for k, v in self._entries.items() if v[0] >= now}
        self._entries[key] = (now + ttl, value)


def token_expiry(token: str) -> float | None:
    """When a JWT says it expires (its ``exp`` claim, seconds since the epoch), read
    without checking its signature: the apiserver's review is what vouches for the
    token. None for a token that is not a JWT with a numeric ``exp``."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        expiry = claims["exp"]
    except (IndexError, KeyError, TypeError, ValueError, binascii.Error):
        return None
    if isinstance(expiry, bool) or not isinstance(expiry, int | float):
        return None
    return float(expiry)


class KubeAuthenticator:
    """``Authenticator`` backed by the apiserver the operator runs against."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        audiences: Sequence[str] = (),
        cache_ttl: float = 10.0,
        lane: kube_threads.Lane = kube_threads.CALLS,
        until_expiry: bool = False,
    ) -> None:
        """``until_expiry``: a token's review is kept at most until the token expires
        (:func:`token_expiry`), and not at all when its expiry cannot be read."""
        self._until_expiry = until_expiry
        self._reviews = Reviews(api_client, audiences)
        self._users = _TTLCache(cache_ttl)
        self._grants = _TTLCache(cache_ttl)
        self._lane = lane

    async def authenticate(self, token: str) -> User | None:
        # Keyed by a digest so the cache never holds a usable token.
        key = hashlib.sha256(token.encode()).digest()
        cached = self._users.get(key)
        if isinstance(cached, User):
            return cached
        user = await self._lane.call(self._review_token, token)
        if user is not None:
            self._users.put(key, user, self._lasts(token))
        return user

    def _lasts(self, token: str) -> float | None:
        """How long the token's review may be kept at most: None, the cache's ttl."""
        if not self._until_expiry:
            return None
        expiry = token_expiry(token)
        return 0.0 if expiry is None else expiry - time.time()

    async def authorize(
        self, user: User, namespace: str, verb: Verb, resource: str = SESSIONS
    ) -> bool:
        extra = tuple(sorted(user.extra.items()))
        key = (user.name, user.uid, user.groups, extra, namespace, verb, resource)
        if self._grants.get(key) is True:
            return True
        allowed = await self._lane.call(self._review_access, user, namespace, verb, resource)
        if allowed:
            self._grants.put(key, True)
        return allowed

    def _review_token(self, token: str) -> User | None:
        reviewed = self._reviews.token(token)
        if reviewed is None:
            return None
        return User(reviewed.name, reviewed.uid, reviewed.groups, reviewed.extra)

    def _review_access(self, user: User, namespace: str, verb: Verb, resource: str) -> bool:
        who = Reviewed(user.name, user.uid, user.groups, user.extra)
        return self._reviews.access(who, GROUP, resource, namespace, verb)
