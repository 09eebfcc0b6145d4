"""``helmr workspace ...``: read a Computer disk's state, delete it with every save."""

from __future__ import annotations

import click

from helmr.cli import render
from helmr.cli.runtime import run, show
from helmr.client import Client
from helmr.protocol.api import parse_workspace_id


def _workspace_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_workspace_id(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


workspace_arg = click.argument(
    "workspace_id", metavar="NAMESPACE/WORKSPACE", callback=_workspace_id
)


@click.group()
def workspace() -> None:
    """Workspaces (Computer disks): read one, or delete it once no session holds it."""


@workspace.command()
@workspace_arg
@click.pass_context
def get(ctx: click.Context, workspace_id: str) -> None:
    """Show the workspace's disk, committed version, pending saves and holder."""

    async def work(client: Client) -> None:
        show(ctx, await client.workspaces.ref(workspace_id).retrieve(), render.workspace)

    run(ctx, work)


@workspace.command()
@workspace_arg
@click.pass_context
def delete(ctx: click.Context, workspace_id: str) -> None:
    """Delete the workspace's disk and every save. Refused while a session holds it:
    close or cancel the session and wait for status closed first."""

    async def work(client: Client) -> None:
        show(ctx, await client.workspaces.ref(workspace_id).delete(), render.workspace)

    run(ctx, work)
