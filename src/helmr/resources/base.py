"""The wire conventions shared by every Helmr custom resource.

Python code uses snake_case; the Kubernetes API uses camelCase. ``WireModel``
translates between them, and ``Resource`` adds the manifest envelope
(``apiVersion``, ``kind``, ``metadata``) and the CRD presentation
(names, printer columns, the ``metadata.name`` rule) that ``crd.py`` renders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError
from pydantic.alias_generators import to_camel

from helmr.errors import InvalidInput

GROUP = "helmr.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# A JSON object, as in CEL rules, printer columns and schema extras.
JsonDict = dict[str, JsonValue]


def cel(rule: str, message: str, *, field_path: str | None = None) -> JsonDict:
    """One CEL rule for ``x-kubernetes-validations``.

    ``field_path`` (relative to the schema node holding the rule, e.g. ``.key``)
    makes the apiserver report the error on that field instead of the node.
    """
    item: JsonDict = {"rule": rule, "message": message}
    if field_path is not None:
        item["fieldPath"] = field_path
    return item


def rules(*items: JsonDict) -> JsonDict:
    """The ``json_schema_extra`` that attaches CEL rules to a field or model."""
    return {"x-kubernetes-validations": list(items)}


class WireModel(BaseModel):
    """A model whose wire form is camelCase JSON, as Kubernetes expects.

    Unknown fields are ignored, as the apiserver prunes them too.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """camelCase JSON of the fields that were set (explicit ``None`` included).

        Fit for a JSON merge patch: unset fields stay untouched on the server,
        a field set to ``None`` is removed.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class OwnerReference(WireModel):
    """An owner of an object: deleting the owner garbage-collects the object."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(WireModel):
    """The part of Kubernetes object metadata Helmr reads and writes.

    Every other metadata field (managedFields, ownerReferences, ...) is kept
    verbatim so that a parsed manifest dumps back unchanged.
    """

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None


class Status(WireModel):
    """A resource's status, which only the operator writes (status subresource)."""

    def status_patch(self) -> dict[str, Any]:
        """A merge-patch body for the status subresource: ``{"status": {...}}``.

        Only the fields that were set are sent; a field set to ``None`` is cleared.
        """
        return {"status": self.to_wire()}


SpecT = TypeVar("SpecT", bound=WireModel)
StatusT = TypeVar("StatusT", bound=Status)


class Resource(WireModel, Generic[SpecT, StatusT]):
    """A namespaced Helmr custom resource: metadata, spec and status."""

    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    SHORT_NAMES: ClassVar[tuple[str, ...]]
    # ``additionalPrinterColumns`` entries, in CRD wire form.
    PRINTER_COLUMNS: ClassVar[tuple[JsonDict, ...]]
    # Extra restriction of ``metadata.name`` (the one metadata field a CRD may restrict).
    NAME_SCHEMA: ClassVar[JsonDict | None] = None

    metadata: ObjectMeta
    spec: SpecT
    status: StatusT | None = None

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> Self:
        """Parses a manifest as the apiserver (or kopf) returns it.

        Raises ``InvalidInput`` when it is another kind or does not fit the model.
        """
        if obj.get("apiVersion") != API_VERSION or obj.get("kind") != cls.KIND:
            raise InvalidInput(
                f"expected apiVersion {API_VERSION} and kind {cls.KIND}, "
                f"got {obj.get('apiVersion')!r} and {obj.get('kind')!r}"
            )
        body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
        try:
            return cls.model_validate(body)
        except ValidationError as exc:
            fields = [".".join(str(part) for part in err["loc"]) for err in exc.errors()]
            raise InvalidInput(f"invalid {cls.KIND} manifest: {exc}", fields=fields) from exc

    def owner_reference(self) -> OwnerReference:
        """A reference to this object as the owner of another (it must have been created)."""
        if self.metadata.name is None or self.metadata.uid is None:
            raise InvalidInput(f"a {self.KIND} owns objects only once it has a name and uid")
        return OwnerReference(
            api_version=API_VERSION, kind=self.KIND, name=self.metadata.name, uid=self.metadata.uid
        )

    def to_manifest(self) -> dict[str, Any]:
        """The manifest to create or apply: camelCase, only the fields that were set."""
        return {"apiVersion": API_VERSION, "kind": self.KIND, **self.to_wire()}
