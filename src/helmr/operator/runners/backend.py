"""Where runner processes run: the seam between the supervisor, which reads from the
store which process must start or stop, and what runs them.

:class:`~helmr.operator.runners.pod_runners.PodRunners` runs each process as a
Kubernetes pod; a backend of local processes (``helmr dev``) or a warm pool
implements the same protocol. Whatever runs a process reports its start and its end
as a :class:`~helmr.operator.runners.pod_reports.PodReport` to
``Supervisor.pod_reported``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from helmr.operator.runners.pods import RunnerSpec
from helmr.resources import Resource

R = TypeVar("R", bound=Resource[Any, Any])


@dataclass(frozen=True, slots=True)
class RunnerRef:
    """One runner process the backend holds, by the Session and epoch it is for."""

    namespace: str
    name: str
    session_id: str
    epoch: int
    deleting: bool
    """Its end was asked for and it has not ended yet."""


@dataclass(frozen=True, slots=True)
class RunnerState:
    gone: bool
    """It is not there (never made, or ended and removed)."""
    started: bool
    """Its runner has started: its preparation succeeded."""
    pending: str
    """Why it has not started yet, as far as the backend can tell."""


class StartRefused(Exception):
    """The backend refused to start a runner; ``gone``: nothing can start in its
    namespace again (it is being deleted)."""

    def __init__(self, message: str, *, gone: bool) -> None:
        super().__init__(message)
        self.gone = gone


class RunnerBackend(Protocol):
    def name(self, session_name: str, epoch: int) -> str:
        """The name of the Session's runner of process ``epoch``."""
        ...

    async def runners(
        self, namespace: str | None, session_id: str | None = None
    ) -> list[RunnerRef]:
        """The runners there are (in ``namespace``; None: everywhere watched), or those
        of ``session_id``."""
        ...

    async def state(self, namespace: str, name: str) -> RunnerState:
        """How the runner ``name`` is doing."""
        ...

    async def start(self, spec: RunnerSpec) -> str:
        """Starts the runner ``spec`` describes and returns its uid, the identity its
        token is checked against (``runners.identity``); StartRefused if it cannot."""
        ...

    async def remove(self, namespace: str, name: str) -> None:
        """Ends the runner ``name`` (one already gone is removed)."""
        ...


class ResourceReader(Protocol):
    """Where the supervisor reads a Session's Actor and Session resources: the
    apiserver (``helmr.kube.client.Kube``), or ``helmr dev``'s actor on disk."""

    async def get_resource(self, kind: type[R], namespace: str, name: str) -> R | None:
        """The resource, or None when there is none."""
        ...
