"""The actor ``helmr dev`` runs: a directory holding an Actor manifest, or ``MODULE:ATTR``.

A directory (``examples/echo``) holds ``actor.yaml``, the Actor manifest a cluster
would be given; its ``entrypoint`` is imported from the directory's parent, the
working directory, as in the runner image (whose ``/app`` holds ``examples/``, and
an actor's ``helmr actor build`` puts it at ``/app/<its name>``): so
``echo.echo:echo`` resolves, with an ``__init__.py`` or without. An entrypoint that
does not start with the directory's name (``echo:echo``) is imported from the
directory itself too. ``MODULE:ATTR`` is imported from the
current directory, as an Actor named after ``ATTR`` with the CRD's defaults.
What the actor's own ``actor(...)`` declares applies where the manifest is silent,
as on a cluster (the runner reports it with its first ``receive``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from helmr.errors import InvalidInput
from helmr.resources import API_VERSION, Actor

MANIFEST = "actor.yaml"
LOCAL_IMAGE = "helmr.local/dev"
"""The image a ``MODULE:ATTR`` actor's manifest names: ``helmr dev`` runs no image."""


@dataclass(frozen=True, slots=True)
class ActorSource:
    """An actor on disk: its manifest, where its code is imported from, what to watch."""

    actor: Actor
    python_path: tuple[Path, ...]
    """Prepended to the runner processes' ``PYTHONPATH``."""
    watched: Path
    """The files whose change replaces the runners (a directory: every file under it)."""

    @property
    def name(self) -> str:
        assert self.actor.metadata.name is not None  # every source names it
        return self.actor.metadata.name


def load_actor(
    where: str, namespace: str, *, spec: Mapping[str, Any] | None = None, cwd: Path | None = None
) -> ActorSource:
    """The actor at ``where`` (a directory or ``MODULE:ATTR``) as an Actor in
    ``namespace``; ``spec`` overrides fields of its manifest's spec (camelCase, as
    in the manifest: ``{"maxTurnDurationSeconds": 2}``)."""
    base = cwd or Path.cwd()
    path = base / where
    if path.is_dir():
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise InvalidInput(f"{where}: a directory to run holds its Actor manifest, {MANIFEST}")
        manifest = yaml.safe_load(manifest_path.read_text())
        roots = _directory_roots(path.resolve(), manifest)
        watched = path.resolve()
    elif re.fullmatch(r"[\w.]+:[\w.]+", where):
        module, _, attr = where.partition(":")
        manifest = {
            "apiVersion": API_VERSION,
            "kind": "Actor",
            "metadata": {"name": re.sub(r"[^a-z0-9-]", "-", attr.lower()).strip("-")},
            "spec": {"image": LOCAL_IMAGE, "entrypoint": where},
        }
        roots = (base.resolve(),)
        watched = _module_root(base.resolve(), module)
    else:
        raise InvalidInput(f"{where}: give an actor's directory (with {MANIFEST}) or MODULE:ATTR")
    if not isinstance(manifest, dict):
        raise InvalidInput(f"{where}: {MANIFEST} is not a manifest")
    manifest["metadata"] = {**(manifest.get("metadata") or {}), "namespace": namespace}
    manifest["spec"] = {**(manifest.get("spec") or {}), **(spec or {})}
    return ActorSource(Actor.from_manifest(manifest), roots, watched)


def _directory_roots(directory: Path, manifest: object) -> tuple[Path, ...]:
    """Where a directory's code is imported from. An entrypoint that names the
    directory as its package (``plain.plain:plain``) is imported from its parent
    alone, as the image lays it out (``/app/plain``, ``/app`` on the path): the
    directory on the path too would make ``plain`` its module ``plain.py`` rather
    than the package, without an ``__init__.py``. Any other (``plain:plain``) is
    imported from the directory as well."""
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    entrypoint = spec.get("entrypoint") if isinstance(spec, dict) else None
    if isinstance(entrypoint, str) and entrypoint.startswith(f"{directory.name}."):
        return (directory.parent,)
    return (directory.parent, directory)


def _module_root(base: Path, module: str) -> Path:
    """The file or package directory of ``module`` under ``base``."""
    first = module.split(".")[0]
    package = base / first
    return package if package.is_dir() else base / f"{first}.py"
