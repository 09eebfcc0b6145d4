"""Kubernetes resource quantities (``10Gi``, ``500M``, ``1e3``) read as numbers, as
the client's ``kubernetes.utils.parse_quantity`` reads them, with the standard
library: ``helmr dev`` sizes each Computer directory with it, and importing the
client would cost a session's first Turn about 0.5 s."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_EXPONENTS = {"n": -3, "u": -2, "m": -1, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_SUFFIX = re.compile(r"(?P<number>.*?)(?P<suffix>[KMGTPE]i|[numkMGTPE])?")


def quantity_bytes(quantity: str) -> int:
    """The whole number ``quantity`` stands for (a claim's size in bytes), rounded
    down; ``ValueError`` for what is no quantity."""
    match = _SUFFIX.fullmatch(quantity)
    assert match is not None  # the pattern matches every string
    number, suffix = match["number"], match["suffix"]
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity") from None
    if not value.is_finite():
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity")
    if suffix is not None:
        base = 1024 if suffix.endswith("i") else 1000
        value *= Decimal(base) ** _EXPONENTS[suffix[0]]
    return int(value)
