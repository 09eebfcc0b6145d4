"""Kubernetes quantities read as the client reads them (``kubernetes.utils.parse_quantity``),
without importing the client: ``helmr dev`` sizes each Computer directory with it, and
the client's import would cost a session's first Turn about 0.5 s."""

from __future__ import annotations

import pytest
from kubernetes.utils import parse_quantity

from helmr.kube.quantities import quantity_bytes
from tests.unit.imports import imported_by, within

QUANTITIES = [
    "0",
    "1",
    "10Gi",
    "1Ki",
    "3Mi",
    "2Ti",
    "1Pi",
    "1Ei",
    "500M",
    "2k",
    "1G",
    "7T",
    "1P",
    "1E",
    "1.5Gi",
    ".5Gi",
    "2.Mi",
    "1e3",
    "1E3",
    "2e+2",
    "1.5e-1",
    "1500m",
    "3n",
    "999u",
    "8Mi",
]


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_a_quantity_is_the_whole_number_the_client_reads(quantity: str) -> None:
    assert quantity_bytes(quantity) == int(parse_quantity(quantity))  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("quantity", ["", "Gi", "1ki", "1Gb", "1.2.3", "x"])
def test_what_is_no_quantity_is_refused(quantity: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        quantity_bytes(quantity)


def test_reading_one_imports_no_kubernetes_client() -> None:
    modules = imported_by("from helmr.kube.quantities import quantity_bytes; quantity_bytes('1Gi')")

    assert within(modules, ("kubernetes",)) == []
