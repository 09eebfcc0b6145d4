"""The pydantic → structural schema conversion and the shape of the generated CRDs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from helmr.resources import Actor, Session, Turn
from helmr.resources.base import Resource, WireModel, cel, rules
from helmr.resources.crd import RESOURCES, custom_resource_definition
from helmr.resources.fields import Json
from helmr.resources.schema import structural_schema


def _root(resource: type[Resource[Any, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = custom_resource_definition(resource)["spec"]["versions"][0]["schema"]
    return schema["openAPIV3Schema"]  # type: ignore[no-any-return]


def _nodes(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from _nodes(prop, f"{path}.{name}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.KIND)
def test_crd_schema_is_structural(resource: type[Resource[Any, Any]]) -> None:
    for path, node in _nodes(_root(resource), resource.KIND):
        forbidden = {"$ref", "$defs", "anyOf", "allOf", "oneOf", "not", "title", "const"} & set(
            node
        )
        assert not forbidden, f"{path} has {forbidden}"
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("default", "") is not None, f"{path} defaults to null"


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.KIND)
def test_every_field_has_a_description(resource: type[Resource[Any, Any]]) -> None:
    for path, node in _nodes(_root(resource), resource.KIND):
        # The apiserver forbids describing metadata; a CRD may only restrict its name.
        if path.startswith(f"{resource.KIND}.metadata"):
            continue
        assert node.get("description"), f"{path} has no description"


def test_only_application_json_preserves_unknown_fields() -> None:
    preserved = {
        path
        for resource in RESOURCES
        for path, node in _nodes(_root(resource), resource.KIND)
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    assert preserved == {"Turn.spec.input", "Turn.status.result", "Turn.status.response"}


def test_application_json_keeps_null() -> None:
    spec = _root(Turn)["properties"]["spec"]
    assert spec["properties"]["input"]["nullable"] is True
    assert "input" in spec["required"]


def test_crds_restrict_label_carrying_names() -> None:
    assert _root(Actor)["properties"]["metadata"]["properties"]["name"]["maxLength"] == 63
    assert _root(Session)["properties"]["metadata"]["properties"]["name"]["maxLength"] == 63
    assert "properties" not in _root(Turn)["properties"]["metadata"]


def test_runner_pod_settings_are_a_deliberate_subset() -> None:
    # A pod setting added here is a security decision: what loosens the restricted
    # profile or the runner's identity (hostNetwork, securityContext, volumes,
    # serviceAccountName, ...) must never become one.
    pod = _root(Actor)["properties"]["spec"]["properties"]["pod"]
    assert set(pod["properties"]) == {
        "imagePullSecrets",
        "runtimeClassName",
        "priorityClassName",
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "labels",
        "annotations",
    }
    assert pod["properties"]["labels"]["maxProperties"] == 32


class _Inner(WireModel):
    """Inner docstring."""

    model_config = ConfigDict(json_schema_extra=rules(cel("self.a > 0", "inner rule")))

    a: int = Field(default=1, ge=0, le=9, description="An integer.")
    b: str | None = Field(default=None, description="Optional text.")


class _Outer(WireModel):
    """Outer docstring."""

    inner: _Inner | None = Field(
        default=None,
        description="Site description.",
        json_schema_extra=rules(cel("self == oldSelf", "site rule")),
    )
    with_default: _Inner = Field(default=_Inner(), description="Defaulted object.")
    kind: str = Field(default="x", pattern="^x$", description="A one-value field.")
    payload: Json = Field(default=None, description="Any JSON.")


def test_optional_ref_is_inlined_with_the_site_winning() -> None:
    inner = structural_schema(_Outer)["properties"]["inner"]
    assert inner["description"] == "Site description."
    assert inner["type"] == "object"
    assert "nullable" not in inner  # the apiserver prunes null into absence
    assert "default" not in inner  # a None default is no default
    assert [rule["message"] for rule in inner["x-kubernetes-validations"]] == [
        "inner rule",
        "site rule",
    ]
    assert inner["properties"]["a"] == {
        "description": "An integer.",
        "type": "integer",
        "default": 1,
        "maximum": 9,
        "minimum": 0,
    }


def test_model_default_leaves_out_unset_optionals() -> None:
    assert structural_schema(_Outer)["properties"]["withDefault"]["default"] == {"a": 1}


def test_json_field_is_untyped_and_nullable() -> None:
    assert structural_schema(_Outer)["properties"]["payload"] == {
        "description": "Any JSON.",
        "nullable": True,
        "x-kubernetes-preserve-unknown-fields": True,
    }


def test_map_field_keeps_its_value_schema() -> None:
    class WithMap(WireModel):
        """A model."""

        labels: dict[str, str] = Field(default_factory=dict, description="Labels.")

    assert structural_schema(WithMap)["properties"]["labels"] == {
        "description": "Labels.",
        "type": "object",
        "additionalProperties": {"type": "string"},
    }


def test_map_field_keeps_its_bounds() -> None:
    class WithBoundedMap(WireModel):
        """A model."""

        labels: dict[str, str] = Field(min_length=1, max_length=8, description="Labels.")

    labels = structural_schema(WithBoundedMap)["properties"]["labels"]
    assert (labels["minProperties"], labels["maxProperties"]) == (1, 8)


def test_literal_becomes_enum() -> None:
    class WithLiteral(WireModel):
        """A model."""

        mode: Literal["on"] = Field(description="Mode.")

    assert structural_schema(WithLiteral)["properties"]["mode"]["enum"] == ["on"]


def test_field_without_description_is_refused() -> None:
    class Undocumented(WireModel):
        """A model."""

        a: int = 1

    with pytest.raises(ValueError, match=r"Undocumented\.a: every field needs a description"):
        structural_schema(Undocumented)


def test_exclusive_bound_is_refused() -> None:
    # OpenAPI v3.0 (CRDs) and JSON Schema 2020-12 (pydantic) disagree on exclusiveMinimum.
    class Exclusive(WireModel):
        """A model."""

        a: int = Field(default=1, gt=0, description="Positive.")

    with pytest.raises(ValueError, match="exclusiveMinimum"):
        structural_schema(Exclusive)


def test_real_union_is_refused() -> None:
    class Union(BaseModel):
        """A model."""

        a: int | str = Field(default=1, description="Either.")

    with pytest.raises(ValueError, match=r"only `X \| None` unions"):
        structural_schema(Union)


def test_untyped_field_is_refused() -> None:
    class Untyped(BaseModel):
        """A model."""

        a: Any = Field(default=None, description="Anything, without saying so.")

    with pytest.raises(ValueError, match="needs a type"):
        structural_schema(Untyped)
