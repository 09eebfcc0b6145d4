"""A fake apiserver on loopback serving the two review APIs (TokenReview,
SubjectAccessReview) from the test's event loop, and a real Kubernetes client
for it: a review that blocked the loop could never be answered."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes import client as k8s


def jwt(claims: dict[str, Any]) -> str:
    """A token shaped as a JWT with ``claims`` (unsigned: the fake apiserver vouches)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.signature"


class FakeApiserver:
    def __init__(self) -> None:
        self.token_reviews: list[dict[str, Any]] = []
        self.access_reviews: list[dict[str, Any]] = []
        self.good_tokens = {"good"}
        """The tokens it authenticates (as alice)."""

    async def token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_reviews.append(body)
        status: dict[str, Any] = {"authenticated": False}
        if body["spec"]["token"] in self.good_tokens:
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


@contextlib.asynccontextmanager
async def serving_reviews() -> AsyncIterator[tuple[FakeApiserver, k8s.ApiClient]]:
    fake = FakeApiserver()
    app = web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", fake.token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.access_review)
    async with TestServer(app) as server:
        config = k8s.Configuration(host=str(server.make_url("")).rstrip("/"))
        with k8s.ApiClient(config) as api_client:
            yield fake, api_client
