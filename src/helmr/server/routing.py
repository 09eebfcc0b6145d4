"""Declared routes: one source of truth for dispatch, input parsing, auth and OpenAPI.

A handler is an ``async`` method marked with ``@route(...)``. Its signature is
the declaration: parameters named ``path``, ``query``, ``headers`` and ``body``
are annotated with the pydantic models they are parsed into, ``exchange`` gets
what the handler may ask of the request beyond them (:class:`Exchange`: a held
reply's head, whether its caller still listens), ``request`` the aiohttp request
(for a handler that writes its own reply: served by aiohttp only), ``subject``
what the guard looked up to authorise the call (the session, for public session
routes, so it is read once), and the return annotation is the response model (a
pydantic model, or one of the runner protocol's dataclasses, as ``body`` may be
too; or ``web.StreamResponse`` for a handler that writes its own response, which
then names its media type in ``@route``). ``openapi.document`` reads the same
declarations, so the served routes and the document cannot drift apart.

Both servers serve a route through its :class:`Endpoint`: aiohttp (``register``)
and, on the runner port of its own, :mod:`helmr.server.runner_server`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, is_dataclass
from typing import Any, Literal, NamedTuple, TypeVar, get_type_hints

from aiohttp import web
from pydantic import BaseModel

from helmr.server.exchange import Exchange, Incoming
from helmr.server.inputs import Input, adapter, headers_of, json_body, query_of

# Who may call a route: nobody needs a token ("none"), a Kubernetes user with
# the route's verb in the namespace ("public"), the session's runner ("runner"), a
# runner pod with no Session yet ("pod": the handler checks its token, its subject).
Access = Literal["none", "public", "runner", "pod"]
JSON = "application/json"
INPUTS = ("path", "query", "headers", "body")
_PARAMETERS = {*INPUTS, "exchange", "request", "subject"}

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True)
class RouteSpec:
    method: str
    path: str
    summary: str
    access: Access
    tag: str
    verb: str | None = None
    resource: str = "sessions"
    """The helmr.dev resource a public route is authorised on, with ``verb``."""
    media_type: str = JSON
    errors: tuple[int, ...] = ()  # statuses beyond those implied by the inputs
    # A streaming route (server-sent events): the model each message's data is.
    stream_item: type[BaseModel] | None = None
    per_turn: bool = False
    """Called for every Turn (its enqueue, its runner's settlement, its output):
    matched before the other routes, in their declaration order (``register``)."""


_MARK = "__helmr_route__"


def route(
    method: str,
    path: str,
    *,
    summary: str,
    access: Access,
    tag: str,
    verb: str | None = None,
    resource: str = "sessions",
    media_type: str = JSON,
    errors: tuple[int, ...] = (),
    stream_item: type[BaseModel] | None = None,
    per_turn: bool = False,
) -> Callable[[F], F]:
    if (access == "public") != (verb is not None):
        raise TypeError("public routes, and only they, name the Kubernetes verb they need")
    spec = RouteSpec(
        method,
        path,
        summary,
        access,
        tag,
        verb,
        resource,
        media_type,
        errors,
        stream_item,
        per_turn,
    )

    def mark(fn: F) -> F:
        setattr(fn, _MARK, spec)
        return fn

    return mark


@dataclass(frozen=True)
class Operation:
    """A route with the models read from its handler's signature."""

    spec: RouteSpec
    handler: Callable[..., Awaitable[Any]]
    inputs: dict[str, type[Any]]
    response: type[Any] | None
    wants_exchange: bool
    wants_request: bool
    wants_subject: bool

    @property
    def operation_id(self) -> str:
        return self.handler.__name__


def _operation(handler: Callable[..., Awaitable[Any]], spec: RouteSpec) -> Operation:
    hints = get_type_hints(handler)
    params = inspect.signature(handler).parameters
    unknown = set(params) - _PARAMETERS
    if unknown:
        raise TypeError(f"{handler.__name__}: unknown parameters {sorted(unknown)}")
    if "{" in spec.path and "path" not in params:
        # The path model is how its parameters are validated, authorised and documented.
        raise TypeError(f"{handler.__name__}: a route with path parameters takes `path`")
    scope = set(hints["path"].model_fields) if "path" in params else set()
    if spec.access == "public" and not scope & {"namespace", "session_id"}:
        raise TypeError(f"{handler.__name__}: a public route names a namespace or a session")
    if spec.access == "runner" and "session_id" not in scope:
        raise TypeError(f"{handler.__name__}: a runner route names its session")
    returns = hints.get("return")
    is_model = isinstance(returns, type) and (
        issubclass(returns, BaseModel) or is_dataclass(returns)
    )
    if not is_model and spec.media_type == JSON:
        raise TypeError(f"{handler.__name__}: a JSON route returns a pydantic model or dataclass")
    return Operation(
        spec=spec,
        handler=handler,
        inputs={name: hints[name] for name in INPUTS if name in params},
        response=returns if is_model else None,
        wants_exchange="exchange" in params,
        wants_request="request" in params,
        wants_subject="subject" in params,
    )


def operations(*apis: object) -> list[Operation]:
    """The marked handlers of ``apis``, bound, in declaration order."""
    found = []
    for api in apis:
        for name, member in vars(type(api)).items():
            spec = getattr(member, _MARK, None)
            if isinstance(spec, RouteSpec):
                found.append(_operation(getattr(api, name), spec))
    return found


class Admission(NamedTuple):
    """What a guard read to decide, for the handler to take rather than read again
    (a tuple: made for every request, and cheaper to make than a frozen dataclass)."""

    subject: object = None
    """The handler's ``subject`` (the session, for a public route that reads it)."""
    headers: BaseModel | None = None
    """The headers parsed, when they are part of the credentials (a runner route's
    process epoch): the handler's ``headers`` if it declares this model."""


# Checks a request's credentials for an operation, given its parsed path and
# whether the handler takes the subject; returns what it read to decide.
Guard = Callable[[Incoming, RouteSpec, BaseModel | None, bool], Awaitable[Admission]]


def _input(op: Operation, name: str) -> Input[Any] | None:
    model = op.inputs.get(name)
    return None if model is None else Input(model, name)


Prepare = Callable[[Incoming, Exchange | None], Awaitable[Awaitable[Any]]]
"""Reads a request's inputs and admits its caller; returns the handler's call, not
yet awaited: the server awaits it, so a waiting long poll keeps no frame of this."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A route as a server serves it: what to call for a request, and how its answer is
    written (None: the handler writes its own reply, a ``web.StreamResponse``)."""

    operation: Operation
    prepare: Prepare
    answer: Callable[[Any], bytes] | None


def endpoint(op: Operation, guard: Guard) -> Endpoint:
    # What every request of this route needs of its declaration, found once here: its
    # inputs' readers, its answer's serializer.
    path_input, query_input = _input(op, "path"), _input(op, "query")
    headers_input, body_input = _input(op, "headers"), _input(op, "body")
    headers_model = op.inputs.get("headers", BaseModel)
    spec, handler = op.spec, op.handler
    wants_exchange, wants_request, wants_subject = (
        op.wants_exchange,
        op.wants_request,
        op.wants_subject,
    )

    async def prepare(request: Incoming, exchange: Exchange | None) -> Awaitable[Any]:
        kwargs: dict[str, Any] = {}
        path = None
        if path_input is not None:
            kwargs["path"] = path = path_input.parse(dict(request.match_info))
        # Credentials before the rest of the input: a stranger learns nothing
        # about the request's shape.
        admission = await guard(request, spec, path, wants_subject)
        if query_input is not None:
            kwargs["query"] = query_input.parse(query_of(request))
        if headers_input is not None:
            if isinstance(admission.headers, headers_model):
                kwargs["headers"] = admission.headers
            else:
                kwargs["headers"] = headers_input.parse(headers_of(request, headers_model))
        if body_input is not None:
            kwargs["body"] = body_input.parse(await json_body(request))
        if wants_exchange:
            kwargs["exchange"] = exchange
        if wants_request:
            kwargs["request"] = request
        if wants_subject:
            kwargs["subject"] = admission.subject
        return handler(**kwargs)

    answer = None if op.response is None else adapter(op.response).dump_json
    return Endpoint(op, prepare, answer)


class _AiohttpExchange:
    """An :class:`Exchange` over aiohttp's request."""

    __slots__ = ("_request", "reply")

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.reply: web.StreamResponse | None = None
        """The held reply, once its head was sent."""

    @property
    def connected(self) -> bool:
        return self._request.protocol.connected

    @property
    def held(self) -> bool:
        return self.reply is not None

    async def hold(self) -> None:
        reply = web.StreamResponse(headers=_JSON_TYPE)
        await reply.prepare(self._request)
        self.reply = reply


_JSON_TYPE = {"Content-Type": JSON}


def _aiohttp_handler(
    served: Endpoint,
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    prepare, answer, wants_exchange = (
        served.prepare,
        served.answer,
        served.operation.wants_exchange,
    )

    async def handle(request: web.Request) -> web.StreamResponse:
        exchange = _AiohttpExchange(request) if wants_exchange else None
        result = await (await prepare(request, exchange))
        if answer is None or isinstance(result, web.StreamResponse):
            response: web.StreamResponse = result
            return response
        if exchange is not None and exchange.reply is not None:
            # The body and the chunked reply's end in one write.
            await exchange.reply.write_eof(answer(result))
            return exchange.reply
        return web.Response(body=answer(result), content_type=JSON)

    return handle


def register(app: web.Application, ops: Iterable[Operation], guard: Guard) -> None:
    """Adds the routes of ``ops``, the ``per_turn`` ones first, each group in the
    order ``ops`` has them. aiohttp tries the routes that share a path's fixed prefix
    (``/runner/v1/sessions``: 15 of them) one after another, each a regular expression
    and a coroutine, in the order they were added; no two of Helmr's patterns match one
    path, so the order changes only how soon one does."""
    for op in sorted(ops, key=lambda op: not op.spec.per_turn):
        app.router.add_route(
            op.spec.method,
            op.spec.path,
            _aiohttp_handler(endpoint(op, guard)),
            name=op.operation_id,
        )
