"""The public REST API of Workspaces (``/v1/namespaces/{ns}/workspaces/{name}``):
read a Computer disk's state, and delete it with every save once no Session
holds it. Authorised on ``workspaces.helmr.dev``."""

from __future__ import annotations

from functools import partial
from typing import Protocol

from helmr.control.public_api import PublicControl
from helmr.protocol import api_routes as routes
from helmr.protocol.api import WorkspaceView
from helmr.protocol.api_requests import WorkspacePath
from helmr.server.routing import route

workspace_route = partial(route, tag="workspaces", access="public", resource="workspaces")


class WorkspaceDeleter(Protocol):
    """Deletes a Workspace's object, whose claims and saves go with it (the operator's)."""

    async def delete_workspace(self, namespace: str, name: str) -> None: ...


class WorkspaceApi:
    def __init__(self, control: PublicControl, deleter: WorkspaceDeleter | None) -> None:
        self._control = control
        self._deleter = deleter

    @workspace_route("GET", routes.WORKSPACE, verb="get", summary="Read a workspace.")
    async def get_workspace(self, path: WorkspacePath) -> WorkspaceView:
        """Its disk's claim, committed version (the last ready save), pending saves and
        holder. A workspace no session has used yet reads as an empty one."""
        return await self._control.get_workspace(path.namespace, path.workspace)

    @workspace_route(
        "DELETE",
        routes.WORKSPACE,
        verb="delete",
        summary="Delete a workspace: its disk and every save.",
        errors=(409,),
    )
    async def delete_workspace(self, path: WorkspacePath) -> WorkspaceView:
        """409 while a session holds it (open, or its execution not yet excluded): poll
        the session for status closed first. Returns the workspace as it was."""
        view = await self._control.get_workspace(path.namespace, path.workspace)
        await self._control.require_unheld_workspace(path.namespace, path.workspace)
        if self._deleter is not None:
            await self._deleter.delete_workspace(path.namespace, path.workspace)
        await self._control.forget_workspace(path.namespace, path.workspace)
        return view
