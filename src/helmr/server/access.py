"""The guard every route passes: who is calling, and may they do this here.

Public routes: the bearer token is a Kubernetes token (``Authenticator``),
authorised for the route's verb on its helmr.dev resource (``sessions``, or
``workspaces``) in the namespace the call is about, which for session routes
is the session's own. Runner
routes: the token must be the identity of exactly the path's session and of
the process epoch the call claims (``Helmr-Process-Epoch``), so a runner can
neither act for another session nor pass for another epoch of its own. A pooled
runner pod's route (its adoption, before it has a Session): its token is the
subject, which the handler checks against the pods.

A session's namespace never changes, so the guard asks the API's kept names
(:mod:`helmr.server.session_names`): a session route whose handler does not
take the session (the enqueue, the hot one) is authorised without reading the
session. A route that takes it reads it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from helmr.control import SessionName
from helmr.errors import Forbidden, Unauthenticated
from helmr.protocol.api import SessionView
from helmr.protocol.api_requests import RunnerHeaders
from helmr.server.auth import Authenticator, RunnerTokenVerifier, bearer_token
from helmr.server.exchange import Incoming
from helmr.server.inputs import Input, headers_of
from helmr.server.routing import Admission, RouteSpec
from helmr.server.session_names import SessionNames

_RUNNER_HEADERS = Input(RunnerHeaders, "headers")


class AccessGuard:
    """The ``routing.Guard`` of every route: checks the caller per the route's ``access``."""

    def __init__(
        self,
        authenticator: Authenticator,
        runner_tokens: RunnerTokenVerifier,
        session_of: Callable[[str], Awaitable[SessionView]],
        names: SessionNames,
    ) -> None:
        self._authenticator = authenticator
        self._runner_tokens = runner_tokens
        self._session_of = session_of
        self._names = names

    async def __call__(
        self, request: Incoming, spec: RouteSpec, path: BaseModel | None, wants_subject: bool
    ) -> Admission:
        """The session the call is about as the subject when it was read to decide
        (always when the handler ``wants_subject``); a runner route's headers."""
        if spec.access == "none":
            return Admission()
        # routing.operations checked that each route's path names what is needed here.
        token = bearer_token(request.headers)
        if spec.access == "pod":
            return Admission(subject=token)  # whose pod it is, the handler looks up
        session_id: str | None = getattr(path, "session_id", None)
        if spec.access == "runner":
            assert session_id is not None
            epoch = _RUNNER_HEADERS.parse(headers_of(request, RunnerHeaders))
            if not await self._runner_tokens.verify(session_id, epoch.process_epoch, token):
                raise Forbidden(
                    f"this token is not the runner token of session {session_id}, "
                    f"process {epoch.process_epoch}"
                )
            return Admission(headers=epoch)
        user = await self._authenticator.authenticate(token)
        if user is None:
            raise Unauthenticated(
                "the bearer token is not valid (unknown or expired); get a new one"
            )
        session = None
        namespace: str | None = getattr(path, "namespace", None)
        if namespace is None:
            assert session_id is not None
            if wants_subject:
                session = await self._session_of(session_id)
                namespace = session.namespace
                self._names.remember(session.id, SessionName(namespace, session.name))
            else:
                namespace = (await self._names(session_id)).namespace
        assert spec.verb is not None
        if not await self._authenticator.authorize(user, namespace, spec.verb, spec.resource):
            raise Forbidden(
                f"user {user.name!r} may not {spec.verb} {spec.resource}.helmr.dev in namespace "
                f"{namespace!r}; ask for a Role that grants it",
                namespace=namespace,
                verb=spec.verb,
            )
        return Admission(subject=session)
