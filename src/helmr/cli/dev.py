"""``helmr dev``: run an actor locally on the real control plane, without a cluster."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("actor")
@click.option("--port", default=8765, show_default=True, help="The API's port (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="The API's address.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".helmr"),
    show_default=True,
    help="Where the store, the Workspaces' Computers and the runner tokens are kept.",
)
@click.option(
    "-n", "--namespace", default="default", show_default=True, help="The Actor's namespace."
)
@click.option("--no-reload", is_flag=True, help="Keep the runners when the actor's files change.")
def dev(actor: str, port: int, host: str, root: Path, namespace: str, no_reload: bool) -> None:
    """Run ACTOR (a directory with actor.yaml, or MODULE:ATTR) on a local control plane.

    Prints the API's URL and token: the Python client, `helmr session ...` and
    `helmr session events --follow` work against it as against a cluster."""
    # The one command that runs the control plane, imported only when it runs.
    try:
        from helmr.dev.command import serve
        from helmr.dev.plane import DevOptions
    except ImportError as exc:
        raise click.ClickException(
            f"helmr dev runs the control plane, which needs its extras"
            f" (pip install 'helmr[testing]'): {exc}"
        ) from exc

    serve(
        actor,
        DevOptions(root=root, namespace=namespace, host=host, port=port, reload=not no_reload),
    )
