"""Issue 27, item 3: the README's "Your own actor" runs as written: an actor
directory with one requirement, its image built with ``helmr actor build`` (no
Docker, no registry) and imported into the node, its Actor declared and a
Session of it run on the cluster, with kubectl alone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .conftest import RUNNER_IMAGE
from .test_kubectl import Kubectl, k, readme_block

__all__ = ["k"]  # the fixture, shared with the kubectl quickstart's test

MARKER = "<!-- own-actor -->"


def test_the_readme_own_actor_runs_as_written(
    k: Kubectl, runner_image: str, tmp_path: Path
) -> None:
    assert runner_image == RUNNER_IMAGE  # the base `helmr actor build` layers onto
    # As a reader runs it: in a directory of their own, with Helmr's commands on PATH.
    k.env["PATH"] = f"{Path(sys.executable).parent}:{k.env['PATH']}"
    done = k.shell("set -euo pipefail\n" + readme_block(MARKER), timeout=600, cwd=tmp_path)

    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "issue: APP-42\nlabels:\n- bug\n- p1\n" in done.stdout
    built = re.search(r"built in ([0-9.]+)s", done.stderr)
    assert built, done.stderr
    print(f"helmr actor build, one requirement: {built.group(1)} s")  # the figure
    assert "helmr.local/yamlify:dev sha256:" in done.stdout
    assert not k.json("sessions")["items"]
