"""Every failure leaves the server as a JSON error body (``HelmrError.to_json``).

Bad input is always a 4xx: aiohttp's own HTTP errors (unknown route, wrong
method, oversize body) are translated here, and ``invalid`` turns a pydantic
validation error of the request into a 400 naming the fields. A call that
Kubernetes refused is answered with the apiserver's own words, by what it
refused (``_FROM_KUBE``: 403, 404, 409 or 400). Only a bug or a broken
dependency is a 500; a dependency that cannot answer now (the store's server
restarting, the apiserver failing a call) is ``Unavailable``, a 503 with
``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiohttp import web
from pydantic import ValidationError

from helmr.errors import (
    Conflict,
    Forbidden,
    HelmrError,
    InvalidInput,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Unavailable,
)
from helmr.kube import errors as kube
from helmr.server.exchange import Incoming

log = logging.getLogger(__name__)
MAX_SUMMARY = 500
RETRY_AFTER = "1"
"""Seconds a client waits before repeating a request answered ``Unavailable``."""
CLIENT_LEFT = 499
"""The status recorded (never received) for a request whose client went away
before its answer: nginx's "client closed request", so request metrics tell it
from a server error."""


def invalid(error: ValidationError, where: str) -> InvalidInput:
    """A 400 naming each wrong field, without echoing the (maybe huge) input back."""
    problems = [
        {"loc": [where, *(str(p) for p in e["loc"])], "msg": e["msg"], "type": e["type"]}
        for e in error.errors(include_url=False, include_input=False, include_context=False)
    ]
    summary = "; ".join(f"{'.'.join(p['loc'])}: {p['msg']}" for p in problems)
    if len(summary) > MAX_SUMMARY:  # deeply nested input makes very long locations
        summary = summary[:MAX_SUMMARY] + "..."
    return InvalidInput(f"fix the request {where}: {summary}", errors=problems)


def no_route() -> NotFound:
    return NotFound("no such route; see GET /openapi.json for the API")


def method_not_allowed(method: str, allowed: Iterable[str]) -> MethodNotAllowed:
    """A 405 naming the ``allowed`` methods (in its answer's ``Allow`` too)."""
    methods = sorted(allowed)
    message = f"{method} is not allowed here; use {', '.join(methods)}"
    return MethodNotAllowed(message, allowed=methods)


def too_large(why: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is larger than the server accepts: {why}")


def _from_http(exc: web.HTTPException) -> HelmrError:
    if isinstance(exc, web.HTTPNotFound):
        return no_route()
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return method_not_allowed(exc.method, exc.allowed_methods)
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return too_large(exc.text or "")
    if 400 <= exc.status < 500:
        return InvalidInput(f"bad request: {exc.reason}")
    return HelmrError(exc.reason)


_FROM_KUBE: dict[type[kube.KubeError], type[HelmrError]] = {
    # Admission's refusals are Forbidden too (a policy, a webhook): the caller reads why.
    kube.Forbidden: Forbidden,
    kube.NotFound: NotFound,
    kube.Conflict: Conflict,
    kube.Invalid: InvalidInput,
    kube.BadRequest: InvalidInput,
}


def _from_kube(error: kube.KubeError) -> HelmrError:
    """What the API answers for a call the apiserver refused (with the apiserver's
    own words); any other of its errors is the apiserver not answering now (503)."""
    kind = _FROM_KUBE.get(type(error), Unavailable)
    return kind(f"Kubernetes answered {error.status}: {error.message}")


def reply_headers(error: HelmrError) -> dict[str, str]:
    """The headers an error's answer carries beside its JSON body: when to ask again,
    what is allowed (a 405 must say, RFC 9110)."""
    if isinstance(error, Unavailable):
        return {"Retry-After": RETRY_AFTER}
    if isinstance(error, MethodNotAllowed):
        return {"Allow": ", ".join(error.details["allowed"])}
    return {}


def respond(error: HelmrError) -> web.Response:
    return web.json_response(error.to_json(), status=error.status, headers=reply_headers(error))


def failure_of(request: Incoming, error: Exception) -> HelmrError | None:
    """What ``error``, raised while handling ``request``, is answered with (logged as
    it needs); None when its client left mid-answer (a runner's receive cut short by a
    restart, a stream reader gone): no one is left to answer, and nothing failed here."""
    if isinstance(error, HelmrError):
        return error
    if isinstance(error, kube.KubeError):
        log.warning("%s %s: Kubernetes answered %s", request.method, request.path, error.status)
        return _from_kube(error)
    if isinstance(error, web.HTTPException) and error.status >= 400:
        return _from_http(error)
    if isinstance(error, ConnectionResetError):
        log.info("the client left during %s %s", request.method, request.path)
        return None
    log.error("unhandled error in %s %s", request.method, request.path, exc_info=error)
    return HelmrError("internal error; the server logged it, please report it")


def failure_response(request: web.Request, error: Exception) -> web.Response | None:
    """aiohttp's JSON answer to ``error`` (:func:`failure_of`): ``CLIENT_LEFT`` for a
    client gone, as the request metrics count it; None for what is no failure (a
    redirect: the caller raises it again, and aiohttp sends it)."""
    if isinstance(error, web.HTTPException) and error.status < 400:
        return None
    failure = failure_of(request, error)
    if failure is None:
        return web.Response(status=CLIENT_LEFT)
    return respond(failure)
