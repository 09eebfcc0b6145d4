"""Workspaces outside an actor: read a Computer disk's state, delete it."""

from __future__ import annotations

from helmr.client._http import Transport
from helmr.protocol import api_routes as routes
from helmr.protocol.api import WorkspaceView, parse_workspace_id

Workspace = WorkspaceView


class WorkspaceRef:
    """One workspace, by the id a Session reports (``session.workspace_id``,
    ``<namespace>/<name>``): ``client.workspaces.ref(state.workspace_id)``."""

    def __init__(self, transport: Transport, workspace_id: str) -> None:
        self._http = transport
        self.id = workspace_id
        self._path = routes.workspace(*parse_workspace_id(workspace_id))

    def __repr__(self) -> str:
        return f"WorkspaceRef({self.id!r})"

    async def retrieve(self) -> Workspace:
        return Workspace.model_validate(await self._http.request("GET", self._path))

    async def delete(self) -> Workspace:
        """Deletes the disk and every save; ``Conflict`` while a session holds it (poll
        the session for ``status == "closed"`` first). Returns the workspace as it was."""
        return Workspace.model_validate(await self._http.request("DELETE", self._path))


class Workspaces:
    def __init__(self, transport: Transport) -> None:
        self._http = transport

    def ref(self, workspace_id: str) -> WorkspaceRef:
        return WorkspaceRef(self._http, workspace_id)
