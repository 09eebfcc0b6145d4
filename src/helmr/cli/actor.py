"""``helmr actor build``: an actor's image without Docker, imported into the local node."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from helmr.images.actor_image import ActorImageError, build_actor_image, import_image

CACHE = Path(os.environ.get("HELMR_CACHE", Path.home() / ".cache" / "helmr"))
CLUSTER_DIR = Path(os.environ.get("HELMR_CLUSTER_DIR", "/var/lib/helmr-cluster"))
RUNNER_ARCHIVE = CACHE / "images" / "runner" / "current.tar"
"""The runner image hack/build-images.sh (`make images`) writes."""
CONTAINERD_SOCKET = CLUSTER_DIR / "containerd" / "containerd.sock"
"""The local cluster's containerd (hack/cluster-up.sh)."""


@click.group()
def actor() -> None:
    """Actors: build one's image."""


@actor.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tag", required=True, help="The image reference, e.g. helmr.local/shout:dev.")
@click.option(
    "--base",
    type=click.Path(dir_okay=False, path_type=Path),
    default=RUNNER_ARCHIVE,
    show_default=True,
    help="The OCI archive of the image to layer onto (the runner image `make images` builds).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the image's OCI archive [default: under the cache, by tag].",
)
@click.option(
    "--wheels",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Install requirements.txt from these wheels only (no index: offline).",
)
@click.option(
    "--import/--no-import",
    "into_node",
    default=True,
    show_default=True,
    help="Import the image into the local cluster's containerd.",
)
@click.option(
    "--containerd-socket",
    type=click.Path(path_type=Path),
    default=CONTAINERD_SOCKET,
    show_default=True,
)
def build(
    directory: Path,
    tag: str,
    base: Path,
    output: Path | None,
    wheels: Path | None,
    into_node: bool,
    containerd_socket: Path,
) -> None:
    """Layer DIRECTORY (and its requirements.txt) onto the runner image as TAG.

    The directory lands at /app/<its name>, so the Actor's entrypoint is
    <name>.<module>:<attr>; declare the Actor with `image: TAG` and
    `imagePullPolicy: Never`. On a cluster with a registry, build from a
    Dockerfile instead (docs/sdk.md, "Your actor's image").
    """
    started = time.monotonic()
    out = output or CACHE / "actors" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)}.tar"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        image = build_actor_image(directory, tag, base, out, wheels=wheels)
        if into_node:
            import_image(image.archive, containerd_socket)
    except ActorImageError as e:
        raise click.ClickException(str(e)) from None
    where = "imported into the node" if into_node else "not imported"
    click.echo(f"{tag} {image.digest} ({where}; archive {image.archive})")
    click.echo(f"entrypoint: {image.package}.<module>:<attr>")
    click.echo(f"built in {time.monotonic() - started:.1f}s", err=True)
