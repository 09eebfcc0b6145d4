"""CRD generation: the committed files, ``--check`` and the CRD envelope."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmr.resources import Resource, Session
from helmr.resources.__main__ import main
from helmr.resources.crd import RESOURCES, custom_resource_definition, render

REPO = Path(__file__).resolve().parents[3]
FILES = (
    "helmr.dev_actors.yaml",
    "helmr.dev_sessions.yaml",
    "helmr.dev_turns.yaml",
    "helmr.dev_workspaces.yaml",
)


def test_committed_crds_are_current() -> None:
    assert main(["--check", "--dir", str(REPO / "crds")]) == 0


def test_generation_is_deterministic_across_processes() -> None:
    # A fresh interpreter with another hash seed must produce the same bytes.
    checked = subprocess.run(
        [sys.executable, "-m", "helmr.resources", "--check"],
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_write_then_check(tmp_path: Path) -> None:
    assert main(["--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == list(FILES)
    assert main(["--check", "--dir", str(tmp_path)]) == 0


def test_check_shows_drift_as_a_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--dir", str(tmp_path)])
    path = tmp_path / "helmr.dev_turns.yaml"
    path.write_text(path.read_text().replace("shortNames:\n    - hturn", "shortNames:\n    - tu"))
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "-    - tu\n" in out
    assert "+    - hturn\n" in out


def test_check_reports_a_missing_crd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--dir", str(tmp_path)])
    (tmp_path / "helmr.dev_actors.yaml").unlink()
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    assert "+kind: CustomResourceDefinition" in capsys.readouterr().out


def test_check_reports_a_stale_crd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--dir", str(tmp_path)])
    (tmp_path / "helmr.dev_workflows.yaml").write_text("kind: CustomResourceDefinition\n")
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    assert "helmr.dev_workflows.yaml: not generated" in capsys.readouterr().out


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.KIND)
def test_yaml_is_the_crd(resource: type[Resource[Any, Any]]) -> None:
    assert yaml.safe_load(render(resource)) == custom_resource_definition(resource)


def test_crd_envelope() -> None:
    crd = custom_resource_definition(Session)
    assert crd["metadata"]["name"] == "sessions.helmr.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": "Session",
        "listKind": "SessionList",
        "plural": "sessions",
        "singular": "session",
        "shortNames": ["hses"],
        "categories": ["helmr"],
    }
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"] is version["storage"] is True
    assert version["subresources"] == {"status": {}}
    columns = {column["name"]: column["jsonPath"] for column in version["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.phase"
    assert columns["Active Turn"] == ".status.activeTurn"
    assert columns["Hold"] == ".status.hold.reason"
