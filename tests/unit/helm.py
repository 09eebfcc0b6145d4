"""Where the helm and promtool binaries are, for the tests that render the chart
and check its alerting rules with them.

``hack/build.sh`` builds both into the cache (CI always builds them first);
a developer may have their own on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CACHE = Path(os.environ.get("HELMR_CACHE", Path.home() / ".cache" / "helmr"))
BUILT_DIR = CACHE / "bin" / "current"


def find_built(name: str) -> str | None:
    """``name`` on PATH, else the one ``hack/build.sh`` built; None if neither."""
    found = shutil.which(name)
    if found:
        return found
    built = BUILT_DIR / name
    if built.is_file() and os.access(built, os.X_OK):
        return str(built)
    return None


def find_helm() -> str | None:
    return find_built("helm")


def find_promtool() -> str | None:
    return find_built("promtool")
