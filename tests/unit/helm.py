"""Where the helm binary is, for the tests that render the chart with it.

``hack/build.sh`` builds helm into the cache (CI always builds it first);
a developer may have their own on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CACHE = Path(os.environ.get("HELMR_CACHE", Path.home() / ".cache" / "helmr"))
BUILT = CACHE / "bin" / "current" / "helm"


def find_helm() -> str | None:
    """helm on PATH, else the one ``hack/build.sh`` built; None if neither."""
    found = shutil.which("helm")
    if found:
        return found
    if BUILT.is_file() and os.access(BUILT, os.X_OK):
        return str(BUILT)
    return None
