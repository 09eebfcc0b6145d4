"""Kubernetes resource quantities (``10Gi``, ``500M``) read as numbers."""

from __future__ import annotations


def quantity_bytes(quantity: str) -> int:
    """The whole number ``quantity`` stands for (a claim's size in bytes)."""
    # Imported here: the client's package costs ``helmr dev``, which sizes no claim, 0.5 s.
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(quantity))  # type: ignore[no-untyped-call]
