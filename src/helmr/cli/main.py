"""The ``helmr`` command: ``helmr session ...`` over the async client.

The API URL and token come from ``--url``/``--token`` or ``HELMR_URL``/``HELMR_TOKEN``.
"""

from __future__ import annotations

import click

from helmr.cli.actor import actor
from helmr.cli.dev import dev
from helmr.cli.runtime import Settings
from helmr.cli.session import session
from helmr.cli.workspace import workspace


@click.group()
@click.option("--url", envvar="HELMR_URL", help="The Helmr API, e.g. https://helmr.example.")
@click.option("--token", envvar="HELMR_TOKEN", help="A Kubernetes bearer token.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.version_option(package_name="helmr")
@click.pass_context
def main(ctx: click.Context, url: str | None, token: str | None, as_json: bool) -> None:
    """Durable agent sessions on Kubernetes."""
    ctx.obj = Settings(url, token, as_json)


# Every command group: `helmr` and `kubectl helmr` (helmr.kubectl) offer the same.
COMMANDS = (session, workspace)
for command in COMMANDS:
    main.add_command(command)
# Building an actor's image is local work, not a request to a Helmr API: `helmr` only.
main.add_command(actor)
# Only `helmr`: it runs a local control plane, nothing kubectl reaches.
main.add_command(dev)
