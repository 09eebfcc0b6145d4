"""An Actor's conditions: ``Accepted``, whether its spec can run, and
``SavesAvailable``, whether its Sessions' Computer disks can be saved.

The CRD's schema already refuses a malformed entrypoint at admission; this
says so on the resource, catches what a pattern cannot (a Python keyword is
not a module name), and, for ``imagePullPolicy: Never``, whether a node has
the image, as far as the nodes' own image lists can tell.
"""

from __future__ import annotations

import keyword
import re

from helmr.operator.disks.save_support import Verdict
from helmr.operator.mirror.conditions import Observation
from helmr.resources import ActorSpec
from helmr.resources.actor import ENTRYPOINT_PATTERN

# The kubelet's default nodeStatusMaxImages: a node listing this many may have more.
NODE_IMAGES_SHOWN = 50


def entrypoint_problem(entrypoint: str) -> str | None:
    """Why ``module:attr`` cannot be imported as written, or None."""
    if re.fullmatch(ENTRYPOINT_PATTERN, entrypoint) is None:
        return f"entrypoint {entrypoint} is not of the form module:attribute"
    names = re.split(r"[.:]", entrypoint)
    reserved = [name for name in names if keyword.iskeyword(name)]
    if reserved:
        return f"entrypoint {entrypoint} uses the Python keyword {reserved[0]} as a name"
    return None


def image_names(image: str) -> set[str]:
    """The names a container runtime may list ``image`` under (registry and tag defaults)."""
    names = {image}
    last = image.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        names |= {f"{name}:latest" for name in names}
    first = image.split("/", 1)[0]
    if "/" not in image:
        names |= {f"docker.io/library/{name}" for name in names}
    elif "." not in first and ":" not in first and first != "localhost":
        names |= {f"docker.io/{name}" for name in names}
    return names


def accepted(
    spec: ActorSpec, nodes: dict[str, list[list[str]]] | None, why_unknown: str = ""
) -> Observation:
    """The ``Accepted`` condition of an Actor with ``spec``. ``nodes`` are the nodes'
    images (each its names), or None when they could not be read (``why_unknown`` says why)."""
    problem = entrypoint_problem(spec.entrypoint)
    if problem is not None:
        return Observation("Accepted", "False", "InvalidEntrypoint", problem)
    if spec.image_pull_policy != "Never":
        message = f"entrypoint {spec.entrypoint} is well formed; {spec.image} is pulled if absent"
        return Observation("Accepted", "True", "Valid", message)
    never = f"imagePullPolicy is Never and image {spec.image}"
    if nodes is None:
        message = f"{never} cannot be checked on the nodes: {why_unknown}"
        return Observation("Accepted", "True", "ImageNotVerified", message)
    wanted = image_names(spec.image)
    having = sorted(
        node for node, images in nodes.items() if any(wanted & set(names) for names in images)
    )
    if having:
        message = f"{never} is present on node {', '.join(having)}"
        return Observation("Accepted", "True", "ImagePresent", message)
    if not nodes:
        return Observation("Accepted", "True", "ImageNotVerified", f"{never}: there are no nodes")
    full = sorted(node for node, images in nodes.items() if len(images) >= NODE_IMAGES_SHOWN)
    if full:
        message = (
            f"{never} is not among the images node {', '.join(full)} reports, but a node"
            f" reports only its {NODE_IMAGES_SHOWN} largest images"
        )
        return Observation("Accepted", "True", "ImageNotVerified", message)
    message = (
        f"{never} is on no node: runner pods cannot start; import the image into the nodes'"
        " container runtime, or use imagePullPolicy IfNotPresent"
    )
    return Observation("Accepted", "False", "ImageNotPresent", message)


def saves_available(saves: Verdict) -> Observation:
    """The ``SavesAvailable`` condition: whether the cluster can save the Computer
    disks of the Actor's Sessions (:mod:`helmr.operator.disks.save_support`)."""
    return Observation("SavesAvailable", saves.available, saves.reason, saves.message)
