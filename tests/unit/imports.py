"""What a fresh interpreter loads: the import budgets of cold starts, asserted on
modules rather than time so they cannot flake."""

from __future__ import annotations

import json
import subprocess
import sys


def imported_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"{statement}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def within(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` (each one or under it) among ``modules``."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))
