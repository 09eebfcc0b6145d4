"""The OpenAPI 3.1 document, generated from the declared routes and their models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic.json_schema import GenerateJsonSchema

from helmr.protocol.api import RetentionBoundary
from helmr.protocol.api_routes import STREAM_END_EVENT, STREAM_RETENTION_EVENT
from helmr.server.inputs import adapter
from helmr.server.routing import JSON, Operation
from helmr.server.sse import StreamEnd

REF = "#/components/schemas/{model}"
Mode = Literal["validation", "serialization"]

_REASONS = {
    400: "The request is malformed (a field, query parameter or header is wrong).",
    401: "No bearer token, or the token is not valid.",
    403: "The token does not grant this verb on this session's namespace or session.",
    404: "No such session, turn, hold or message.",
    408: "The long poll saw nothing within its timeout.",
    409: "The request does not fit the current state (see the error code).",
    413: "The body is larger than the server accepts.",
    415: "The body is not application/json.",
    503: "Not ready yet; retry later.",
}

_SECURITY: dict[str, list[dict[str, list[str]]]] = {
    "public": [{"kubernetes": []}],
    "runner": [{"runnerToken": []}],
    "pod": [{"runnerToken": []}],
    "none": [],
}


def _error_statuses(op: Operation) -> list[int]:
    statuses = set(op.spec.errors)
    if op.inputs:
        statuses.add(400)
    if op.spec.access != "none":
        statuses |= {401, 403}
    path = op.inputs.get("path")
    if path is not None and "session_id" in path.model_fields:
        statuses.add(404)
    if "body" in op.inputs:
        statuses |= {409, 413, 415}
    return sorted(statuses)


def _models(ops: list[Operation], error: type[Any]) -> list[tuple[type[Any], Mode]]:
    wanted: list[tuple[type[Any], Mode]] = [(error, "serialization")]
    for op in ops:
        wanted += [(model, "validation") for model in op.inputs.values()]
        for model in (op.response, op.spec.stream_item):
            if model is not None:
                wanted.append((model, "serialization"))
        if op.spec.stream_item is not None:
            wanted.append((RetentionBoundary, "serialization"))
            wanted.append((StreamEnd, "serialization"))
    return list(dict.fromkeys(wanted))


def _present(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without its ``null`` branch: None is sent by leaving it out."""
    branches = schema.get("anyOf")
    if not branches:
        return schema
    kept = [b for b in branches if b != {"type": "null"}]
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
    return {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}


def _stream_event(
    data: dict[str, Any], retention: dict[str, Any], end: dict[str, Any]
) -> dict[str, Any]:
    """One server-sent event (OpenAPI 3.1 describes a stream by its events)."""
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {
                "type": "string",
                "enum": ["message", STREAM_RETENTION_EVENT, STREAM_END_EVENT],
                "description": "`message`: a record; `retention`: the records after the cursor"
                " up to `retained_after` were removed by history retention (before any record"
                " after it); `end`: the session ended and every record was sent"
                ' (data: {"status": ...}).',
            },
            "id": {
                "type": "string",
                "description": "The record's sequence (`retention`: the boundary), for"
                " Last-Event-ID.",
            },
            "data": {
                "type": "string",
                "contentMediaType": JSON,
                "contentSchema": {"anyOf": [data, retention, end]},
            },
        },
    }


def _parameters(model: type[Any], where: str, schema: dict[str, Any]) -> list[dict[str, Any]]:
    params = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        param: dict[str, Any] = {
            "name": key,
            "in": where,
            "required": where == "path" or field.is_required(),
            "schema": _present(schema["properties"][key]),
        }
        if field.description:
            param["description"] = field.description
        params.append(param)
    return params


def _operation(
    op: Operation,
    refs: Mapping[tuple[Any, Mode], dict[str, Any]],
    defs: dict[str, Any],
    error_ref: Any,
) -> dict[str, Any]:
    parameters = []
    for where, model in (("path", "path"), ("query", "query"), ("header", "headers")):
        if model in op.inputs:
            cls = op.inputs[model]
            name = refs[(cls, "validation")]["$ref"].rsplit("/", 1)[-1]
            parameters += _parameters(cls, where, defs[name])
    if op.response is not None:
        content: dict[str, Any] = {JSON: {"schema": refs[(op.response, "serialization")]}}
    elif op.spec.stream_item is not None:
        item = refs[(op.spec.stream_item, "serialization")]
        retention = refs[(RetentionBoundary, "serialization")]
        end = refs[(StreamEnd, "serialization")]
        content = {op.spec.media_type: {"schema": _stream_event(item, retention, end)}}
    else:
        content = {op.spec.media_type: {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {"200": {"description": op.spec.summary, "content": content}}
    for status in _error_statuses(op):
        responses[str(status)] = {
            "description": _REASONS[status],
            "content": {JSON: {"schema": error_ref}},
        }
    doc: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.spec.summary,
        "tags": [op.spec.tag],
        "parameters": parameters,
        "responses": responses,
        "security": _SECURITY[op.spec.access],
    }
    if op.handler.__doc__:
        doc["description"] = " ".join(op.handler.__doc__.split())
    if op.spec.verb is not None:
        doc["x-kubernetes-verb"] = op.spec.verb
    body = op.inputs.get("body")
    if body is not None:
        ref = refs[(body, "validation")]
        doc["requestBody"] = {
            "required": bool(defs[ref["$ref"].rsplit("/", 1)[-1]].get("required")),
            "content": {JSON: {"schema": ref}},
        }
    return doc


def document(ops: list[Operation], *, title: str, version: str, error: type[Any]) -> dict[str, Any]:
    # As pydantic's models_json_schema, for dataclasses too (the runner protocol's).
    inputs = [(model, mode, adapter(model).core_schema) for model, mode in _models(ops, error)]
    # cast: a class is hashable, which mypy's stubs do not say of type[Any].
    refs, found = GenerateJsonSchema(ref_template=REF).generate_definitions(cast(Any, inputs))
    defs: dict[str, Any] = {str(name): schema for name, schema in found.items()}
    error_ref = refs[(error, "serialization")]
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        paths.setdefault(op.spec.path, {})[op.spec.method.lower()] = _operation(
            op, refs, defs, error_ref
        )
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": defs,
            "securitySchemes": {
                "kubernetes": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A Kubernetes token; authorised by SubjectAccessReview "
                    "on sessions.helmr.dev in the session's namespace.",
                },
                "runnerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The runner token of exactly this session.",
                },
            },
        },
    }
