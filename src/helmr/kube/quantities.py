"""Kubernetes resource quantities (``10Gi``, ``500M``) read as numbers."""

from __future__ import annotations

from kubernetes.utils import parse_quantity


def quantity_bytes(quantity: str) -> int:
    """The whole number ``quantity`` stands for (a claim's size in bytes)."""
    return int(parse_quantity(quantity))  # type: ignore[no-untyped-call]
