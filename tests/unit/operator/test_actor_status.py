"""An Actor's Accepted condition (issue 12): a well-formed entrypoint, and for
imagePullPolicy Never whether a node lists the image, or why that is unknown."""

from __future__ import annotations

from helmr.operator.mirror.actor_status import NODE_IMAGES_SHOWN, accepted, image_names
from helmr.resources import ActorSpec

IMAGE = "helmr.local/runner:dev"


def spec(**fields: str) -> ActorSpec:
    return ActorSpec.model_validate({"image": IMAGE, "entrypoint": "echo.echo:echo", **fields})


def test_a_well_formed_entrypoint_with_pulled_images_is_accepted() -> None:
    seen = accepted(spec(), None)
    assert (seen.status, seen.reason) == ("True", "Valid")


def test_a_keyword_is_not_a_module_name() -> None:
    seen = accepted(spec(entrypoint="echo.class:echo"), None)
    assert (seen.status, seen.reason) == ("False", "InvalidEntrypoint")
    assert "keyword class" in seen.message


def test_never_pulled_image_present_on_a_node() -> None:
    nodes = {"n1": [["other:1"]], "n2": [[f"{IMAGE}"], ["x"]]}
    seen = accepted(spec(imagePullPolicy="Never"), nodes)
    assert (seen.status, seen.reason) == ("True", "ImagePresent")
    assert "node n2" in seen.message


def test_never_pulled_image_absent_from_every_node() -> None:
    seen = accepted(spec(imagePullPolicy="Never"), {"n1": [["other:1"]]})
    assert (seen.status, seen.reason) == ("False", "ImageNotPresent")


def test_unknown_when_a_node_list_may_be_cut_or_nodes_cannot_be_read() -> None:
    full = {"n1": [[f"img{i}:1"] for i in range(NODE_IMAGES_SHOWN)]}
    seen = accepted(spec(imagePullPolicy="Never"), full)
    assert (seen.status, seen.reason) == ("True", "ImageNotVerified")
    forbidden = accepted(spec(imagePullPolicy="Never"), None, "the operator may not list nodes")
    assert (forbidden.status, forbidden.reason) == ("True", "ImageNotVerified")
    assert forbidden.message.endswith("the operator may not list nodes")


def test_image_names_as_runtimes_list_them() -> None:
    assert "docker.io/library/busybox:latest" in image_names("busybox")
    assert "docker.io/team/app:1" in image_names("team/app:1")
    assert image_names(IMAGE) == {IMAGE}
