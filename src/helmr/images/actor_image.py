"""An actor's image without Docker: its directory, and its requirements, as one
layer over the runner image (``helmr actor build``).

The directory lands at ``/app/<its name>`` (the runner image's working
directory, on its ``PYTHONPATH``), so the Actor's entrypoint is
``<name>.<module>:<attr>``, as ``echo.echo:echo`` is for examples/echo. Its
``requirements.txt``, if any, is installed with pip as wheels for the image's
Python and platform into ``/opt/actor/lib``, put first on ``PYTHONPATH``:
pip reads its usual configuration (an index, a mirror, ``PIP_FIND_LINKS``),
and ``wheels`` makes the build offline (``--no-index --find-links``).
Everything is compiled once, as the runner image is: its root filesystem is
read-only at run time.
"""

from __future__ import annotations

import compileall
import py_compile
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helmr.images.oci import BaseImage, base_image, build, layer_tar, local_layer

APP_DIR = "app"
ACTOR_LIB = "/opt/actor/lib"
REQUIREMENTS = "requirements.txt"
PYTHON_VERSION = "3.11"
"""The runner image's Python (Debian bookworm's), for which wheels are chosen."""
MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}
"""OCI architecture names to the machine names manylinux wheel tags use."""
LEFT_OUT = ("__pycache__", "*.pyc", ".*")
"""Not copied from the actor's directory: caches and hidden files (.venv, .git)."""


class ActorImageError(Exception):
    """Why an actor image could not be built, in one sentence for its author."""


@dataclass(frozen=True)
class ActorImage:
    tag: str
    digest: str
    archive: Path
    package: str
    """The directory's name under /app: the first part of the entrypoint."""


def build_actor_image(
    directory: Path, tag: str, base: Path, out: Path, *, wheels: Path | None = None
) -> ActorImage:
    """Writes the image ``tag`` (an OCI archive at ``out``): ``base`` plus one layer."""
    package = directory.resolve().name
    if not directory.is_dir():
        raise ActorImageError(f"{directory} is not a directory")
    if not package.isidentifier():
        raise ActorImageError(
            f"{directory}: its name {package!r} is not a Python identifier, and it is the"
            " package the entrypoint names; rename the directory"
        )
    if not base.is_file():
        raise ActorImageError(
            f"no base image archive at {base}: build the runner image first (`make images`)"
        )
    image = base_image(base)
    with tempfile.TemporaryDirectory(prefix="helmr-actor-") as staging:
        root = Path(staging) / "root"
        shutil.copytree(
            directory, root / APP_DIR / package, ignore=shutil.ignore_patterns(*LEFT_OUT)
        )
        requirements = directory / REQUIREMENTS
        if requirements.is_file():
            _install(requirements, root / ACTOR_LIB.lstrip("/"), image, wheels)
        # Reproducible: unchecked-hash (no source mtimes in the .pyc) and the
        # image's paths (not the staging directory's) as the code's file names.
        compileall.compile_dir(
            root,
            ddir="/",
            quiet=2,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        layer = Path(staging) / "layer.tar"
        layer_tar(root, layer)
        config = _runtime(image, with_lib=requirements.is_file())
        digest = build(out, tag, image.architecture, [*image.layers, local_layer(layer)], config)
    return ActorImage(tag, digest, out, package)


def _install(requirements: Path, target: Path, image: BaseImage, wheels: Path | None) -> None:
    machine = MACHINES.get(image.architecture, image.architecture)
    offline = ["--no-index", "--find-links", str(wheels)] if wheels else []
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--target",
        str(target),
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--platform",
        f"manylinux2014_{machine}",
        "--implementation",
        "cp",
        *offline,
        "--requirement",
        str(requirements),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1:] or ["pip failed"]
        raise ActorImageError(f"pip could not install {requirements}: {why[0]}")


def _runtime(image: BaseImage, *, with_lib: bool) -> dict[str, object]:
    """The base image's runtime config, with the actor's libraries first on PYTHONPATH."""
    runtime = image.runtime
    if not with_lib:
        return runtime
    env = [str(e) for e in runtime.get("Env") or []]
    paths = [e.split("=", 1)[1] for e in env if e.startswith("PYTHONPATH=")]
    pythonpath = ":".join([ACTOR_LIB, *paths])
    runtime["Env"] = [e for e in env if not e.startswith("PYTHONPATH=")] + [
        f"PYTHONPATH={pythonpath}"
    ]
    return runtime


def import_image(archive: Path, containerd_socket: Path) -> None:
    """Imports the archive into the node's containerd (its Kubernetes namespace)."""
    if not containerd_socket.exists():
        raise ActorImageError(
            f"no containerd socket at {containerd_socket}: is the local cluster up"
            " (`make cluster-up`)? Or pass --no-import and load the archive yourself"
        )
    if shutil.which("ctr") is None:
        raise ActorImageError("ctr is not installed: run hack/install-deps.sh as root")
    command = ["ctr", "--address", str(containerd_socket), "--namespace", "k8s.io"]
    done = subprocess.run(
        [*command, "images", "import", "--no-unpack=false", str(archive)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ActorImageError(f"ctr could not import {archive}: {done.stderr.strip()}")
