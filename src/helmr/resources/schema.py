"""Pydantic JSON Schema → Kubernetes structural schema (OpenAPI v3 subset).

The apiserver only accepts "structural" schemas: every node typed, no ``$ref``,
no ``anyOf`` for plain optionality, no ``additionalProperties`` next to
``properties``. Pydantic emits JSON Schema 2020-12, so this module inlines
definitions, maps optional fields, drops what Kubernetes does not know, and
refuses everything else, so a model change can never silently produce a CRD
the apiserver would reject or misread.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# Keywords that mean the same in pydantic's output and in a CRD schema.
_KEPT = frozenset(
    {
        "type",
        "format",
        "description",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "nullable",
        "required",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    }
)
_NULL: dict[str, Any] = {"type": "null"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of ``model``'s wire form, for ``openAPIV3Schema``."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    assert isinstance(defs, dict)
    return _convert(raw, defs, model.__name__)


def _convert(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    node = _resolve(node, defs, path)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue  # titles only repeat the field name; kubectl explain shows descriptions
        if key == "const":
            out["enum"] = [value]  # a one-value Literal
        elif key == "default":
            if value is not None:  # None means "absent", which needs no default
                out["default"] = _without_nulls(value)
        elif key == "properties":
            assert isinstance(value, dict)
            out["properties"] = {
                name: _convert(prop, defs, f"{path}.{name}") for name, prop in value.items()
            }
        elif key == "items":
            assert isinstance(value, dict)
            out["items"] = _convert(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            if not isinstance(value, dict):
                raise ValueError(f"{path}: additionalProperties must be a schema, not {value!r}")
            out["additionalProperties"] = _convert(value, defs, f"{path}.*")
        elif key in _KEPT:
            out[key] = value
        else:
            raise ValueError(f"{path}: JSON Schema keyword {key!r} has no structural equivalent")
    _check(out, path)
    # A fixed key order keeps the YAML readable: what a field is, then its type.
    return {key: out[key] for key in sorted(out, key=_key_rank)}


def _key_rank(key: str) -> tuple[int, str]:
    return ({"description": 0, "type": 1}.get(key, 2), key)


def _resolve(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    """Replaces ``$ref`` and an optional ``anyOf [X, null]`` with X, keeping the site's keys.

    The site's keys (a field's description, default, CEL rules) win over the
    definition's (a class docstring), except that CEL rules from both apply.
    """
    if "anyOf" in node:
        rest = {key: value for key, value in node.items() if key != "anyOf"}
        variants = [variant for variant in node["anyOf"] if variant != _NULL]
        if len(variants) != 1 or len(node["anyOf"]) != 2:
            raise ValueError(f"{path}: only `X | None` unions are supported, got {node['anyOf']}")
        # Optional means "may be absent". The apiserver prunes a null in a
        # non-nullable field, so null and absent both read back as None.
        return _merge(_resolve(variants[0], defs, path), rest)
    if "$ref" in node:
        name = str(node["$ref"]).removeprefix("#/$defs/")
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return _merge(_resolve(defs[name], defs, path), rest)
    return node


def _merge(base: dict[str, Any], site: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **site}
    validations = [
        *_list(base, "x-kubernetes-validations"),
        *_list(site, "x-kubernetes-validations"),
    ]
    if validations:
        merged["x-kubernetes-validations"] = validations
    return merged


def _list(node: dict[str, Any], key: str) -> list[Any]:
    value = node.get(key, [])
    assert isinstance(value, list)
    return value


def _without_nulls(value: Any) -> Any:
    # A model default dumps its unset optional fields as null; in a CRD default
    # they would be stored as nulls instead of being left out.
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


def _check(node: dict[str, Any], path: str) -> None:
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        raise ValueError(f"{path}: a structural schema needs a type (or preserve-unknown-fields)")
    if "properties" in node and "additionalProperties" in node:
        raise ValueError(f"{path}: properties and additionalProperties cannot be combined")
    properties = node.get("properties", {})
    assert isinstance(properties, dict)
    for name, prop in properties.items():
        if not prop.get("description"):
            raise ValueError(f"{path}.{name}: every field needs a description (kubectl explain)")
