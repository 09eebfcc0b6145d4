"""The printer columns of the Helmr resources: what ``kubectl get`` shows of them."""

from __future__ import annotations

from helmr.resources.base import JsonDict


def column(
    name: str,
    json_path: str,
    *,
    type: str = "string",
    priority: int | None = None,
    description: str | None = None,
) -> JsonDict:
    """One of a CRD's ``additionalPrinterColumns`` (``kubectl get``); ``priority`` 1:
    shown only with ``-o wide``."""
    item: JsonDict = {"name": name, "type": type}
    if description is not None:
        item["description"] = description
    item["jsonPath"] = json_path
    if priority is not None:
        item["priority"] = priority
    return item


def condition(type: str, field: str = "status") -> str:
    """The JSONPath of a field (``status``, ``reason``) of the condition of that type."""
    return f'.status.conditions[?(@.type=="{type}")].{field}'


AGE = column("Age", ".metadata.creationTimestamp", type="date")
"""The column every resource ends with, as the core resources do."""
