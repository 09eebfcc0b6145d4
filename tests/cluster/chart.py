"""Some of the chart's objects, rendered by the real helm binary for a release in a
namespace of a test's, for the test to apply."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from tests.unit.helm import find_helm

from .conftest import REPO

CHART = REPO / "charts" / "helmr"
RELEASE = "helmr"


def render_chart(namespace: str, templates: list[str], *values: str) -> list[dict[str, Any]]:
    """The objects of ``templates`` (``rbac.yaml``, ...) for a release in ``namespace``
    (``values``: ``--set`` arguments); skips the test without helm."""
    helm = find_helm()
    if helm is None:
        pytest.skip("no helm binary (hack/build.sh builds it)")
    shown = [arg for template in templates for arg in ("--show-only", f"templates/{template}")]
    rendered = subprocess.run(
        [
            helm,
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            *shown,
            *(arg for value in values for arg in ("--set", value)),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]
