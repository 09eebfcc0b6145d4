"""KubeAuthenticator through the real Kubernetes client, against a fake apiserver on loopback.

The fake serves the two review APIs from this test's event loop, so a review
that blocked the loop could never be answered: the test finishing shows the
reviews run off the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes import client as k8s

from helmr.server import User
from helmr.server.kube_auth import KubeAuthenticator

ALICE = User("alice", "u-1", ("devs",), {"scopes": ("helmr",)})


class FakeApiserver:
    def __init__(self) -> None:
        self.token_reviews: list[dict[str, Any]] = []
        self.access_reviews: list[dict[str, Any]] = []

    async def token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_reviews.append(body)
        status: dict[str, Any] = {"authenticated": False}
        if body["spec"]["token"] == "good":
            status = {
                "authenticated": True,
                "user": {
                    "username": "alice",
                    "uid": "u-1",
                    "groups": ["devs"],
                    "extra": {"scopes": ["helmr"]},
                },
            }
        return web.json_response({**body, "status": status})

    async def access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.access_reviews.append(body)
        spec, attrs = body["spec"], body["spec"]["resourceAttributes"]
        allowed = spec["user"] == "alice" and attrs == {
            "group": "helmr.dev",
            "resource": "sessions",
            "namespace": "team-a",
            "verb": "get",
        }
        return web.json_response({**body, "status": {"allowed": allowed}})


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[FakeApiserver, k8s.ApiClient]]:
    fake = FakeApiserver()
    app = web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", fake.token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.access_review)
    async with TestServer(app) as server:
        config = k8s.Configuration(host=str(server.make_url("")).rstrip("/"))
        with k8s.ApiClient(config) as api_client:
            yield fake, api_client


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
