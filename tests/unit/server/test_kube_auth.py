"""KubeAuthenticator through the real Kubernetes client, against a fake apiserver on loopback.

The fake serves the two review APIs from this test's event loop, so a review
that blocked the loop could never be answered: the test finishing shows the
reviews run off the loop (on the authenticator's ``kube_threads`` lane).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest
from kubernetes import client as k8s

from helmr.kube import threads as kube_threads
from helmr.server import User, kube_auth
from helmr.server.kube_auth import KubeAuthenticator, token_expiry
from tests.unit.review_apiserver import FakeApiserver, jwt, serving_reviews

ALICE = User("alice", "u-1", ("devs",), {"scopes": ("helmr",)})


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[FakeApiserver, k8s.ApiClient]]:
    async with serving_reviews() as served:
        yield served


async def test_token_review(apiserver: tuple[FakeApiserver, k8s.ApiClient]) -> None:
    fake, api_client = apiserver
    auth = KubeAuthenticator(api_client, audiences=["helmr"])
    assert await auth.authenticate("good") == ALICE
    assert await auth.authenticate("bad") is None
    assert [r["spec"] for r in fake.token_reviews] == [
        {"token": "good", "audiences": ["helmr"]},
        {"token": "bad", "audiences": ["helmr"]},
    ]


async def test_subject_access_review(apiserver: tuple[FakeApiserver, k8s.ApiClient]) -> None:
    fake, api_client = apiserver
    auth = KubeAuthenticator(api_client)
    assert await auth.authorize(ALICE, "team-a", "get") is True
    assert await auth.authorize(ALICE, "team-a", "update") is False
    assert await auth.authorize(ALICE, "team-b", "get") is False
    sent = fake.access_reviews[0]["spec"]
    assert (sent["user"], sent["uid"], sent["groups"], sent["extra"]) == (
        "alice",
        "u-1",
        ["devs"],
        {"scopes": ["helmr"]},
    )


async def test_positive_answers_are_cached_denials_are_not(
    apiserver: tuple[FakeApiserver, k8s.ApiClient],
) -> None:
    fake, api_client = apiserver
    auth = KubeAuthenticator(api_client, cache_ttl=60)
    for _ in range(3):
        assert await auth.authenticate("good") == ALICE
        assert await auth.authenticate("bad") is None
        assert await auth.authorize(ALICE, "team-a", "get") is True
        assert await auth.authorize(ALICE, "team-a", "update") is False
    assert [r["spec"]["token"] for r in fake.token_reviews] == ["good", "bad", "bad", "bad"]
    verbs = [r["spec"]["resourceAttributes"]["verb"] for r in fake.access_reviews]
    assert verbs == ["get", "update", "update", "update"]

    uncached = KubeAuthenticator(api_client, cache_ttl=0)
    await uncached.authenticate("good")
    await uncached.authenticate("good")
    assert len(fake.token_reviews) == 6


async def test_reviews_run_on_the_lane_given_never_behind_another(
    apiserver: tuple[FakeApiserver, k8s.ApiClient],
) -> None:
    _, api_client = apiserver
    own = kube_threads.Lane(1, "test-reviews")
    auth = KubeAuthenticator(api_client, lane=own)
    release = threading.Event()
    # Every thread of the shared lane busy: a review there would wait until released.
    blocked = [kube_threads.call(release.wait) for _ in range(kube_threads.THREADS)]
    waiting = asyncio.gather(*blocked)
    try:
        assert await asyncio.wait_for(auth.authenticate("good"), 5) == ALICE
        assert await asyncio.wait_for(auth.authorize(ALICE, "team-a", "get"), 5) is True
    finally:
        release.set()
        await waiting


def test_token_expiry_is_a_jwt_exp_claim_or_none() -> None:
    assert token_expiry(jwt({"exp": 1_800_000_000, "sub": "x"})) == 1_800_000_000.0
    assert token_expiry(jwt({"exp": 1.5})) == 1.5
    for not_one in (
        "good",
        "a.b.c",
        "a.!!!.c",
        jwt({"sub": "x"}),
        jwt({"exp": "soon"}),
        jwt({"exp": True}),
        f"x.{jwt({'exp': 1}).split('.')[0]}",  # a JSON payload that is no object with exp
    ):
        assert token_expiry(not_one) is None, not_one


async def test_a_review_until_expiry_lasts_no_longer_than_its_token(
    apiserver: tuple[FakeApiserver, k8s.ApiClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept for the cache's ttl, unless the token expires sooner; and a token whose
    expiry cannot be read is reviewed at every call."""
    fake, api_client = apiserver
    now = [1000.0]
    clock = SimpleNamespace(monotonic=lambda: now[0], time=lambda: 1_700_000_000 + now[0])
    monkeypatch.setattr(kube_auth, "time", clock)
    soon, later = jwt({"exp": clock.time() + 30}), jwt({"exp": clock.time() + 3600})
    fake.good_tokens |= {soon, later}
    auth = KubeAuthenticator(api_client, cache_ttl=60, until_expiry=True)
    for elapsed in (0.0, 29.0, 31.0, 59.0, 61.0):
        now[0] = 1000.0 + elapsed
        for token in (soon, later, "good"):
            assert await auth.authenticate(token) == ALICE
    reviewed = Counter(r["spec"]["token"] for r in fake.token_reviews)
    # soon: at 0 and once expired (31; 59 and 61 each again: no review of an
    # expired token is kept); later: at 0 and past the ttl (61); good: every call.
    assert reviewed == {soon: 4, later: 2, "good": 5}
