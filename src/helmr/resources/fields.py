"""Field types shared by the Helmr resources, constrained as Kubernetes constrains them.

The patterns and lengths hold on both sides: pydantic checks them in Python and
the generated CRD schema makes the apiserver check them at admission.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, JsonValue, WithJsonSchema

from helmr.constraints import NO_NUL
from helmr.resources.base import JsonDict, WireModel

# A DNS-1123 label: how Kubernetes names most things, and what fits in a label value.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
# The same rule for ``metadata.name``, which the CRD restricts with a bare schema.
LABEL_NAME_SCHEMA: JsonDict = {"type": "string", "maxLength": 63, "pattern": DNS_LABEL_PATTERN}

# A DNS-1123 subdomain: the rule for object names such as storage and snapshot classes.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DnsSubdomain = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]

# A non-negative Kubernetes resource quantity ("500m", "1Gi", "2"), the same grammar
# as the core API's Quantity without the sign.
QUANTITY_PATTERN = (
    r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[str, Field(min_length=1, max_length=64, pattern=QUANTITY_PATTERN)]

# A free-form key chosen by an application (idempotency keys, Session keys); the
# store keeps it as text, which cannot hold NUL.
Key = Annotated[str, Field(min_length=1, max_length=256, pattern=NO_NUL)]

# Application-defined JSON: kept verbatim by the apiserver, JSON null included.
Json = Annotated[
    JsonValue,
    WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True, "nullable": True}),
]

# A status's ``observedGeneration``: the ``metadata.generation`` it reflects.
ObservedGeneration = Annotated[
    int | None, Field(ge=0, description="The `metadata.generation` the status reflects.")
]


class Condition(WireModel):
    """One observation of the resource's state, as in metav1.Condition."""

    type: str = Field(
        min_length=1,
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Kind of condition in CamelCase, for example `Ready`.",
    )
    status: Literal["True", "False", "Unknown"] = Field(
        description="Whether the condition holds: `True`, `False` or `Unknown`."
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The `metadata.generation` the condition was computed from.",
    )
    last_transition_time: datetime = Field(
        description="When the condition last changed from one status to another."
    )
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Machine-readable CamelCase reason for the last transition.",
    )
    message: str = Field(
        default="",
        max_length=32768,
        description="Human-readable details about the last transition.",
    )


# A status's ``conditions``: keyed by ``type`` like the core resources' conditions.
Conditions = Annotated[
    list[Condition] | None,
    Field(
        max_length=16,
        description="Current observations of the resource's state, at most one per `type`.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    ),
]
