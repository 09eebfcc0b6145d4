"""``helmr dev DIR`` as an author runs it: a process of its own that prints the API's
URL and token, which the unchanged ``helmr`` CLI then uses, ``events --follow`` too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from helmr.cli import main

ECHO = Path(__file__).parents[3] / "examples" / "echo"


@pytest.fixture
def dev_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """``helmr dev examples/echo`` running; the environment its printout says to export."""
    helmr = Path(sys.executable).parent / "helmr"
    command = [str(helmr), "dev", str(ECHO), "--port", "0", "--root", str(tmp_path / "state")]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:
        try:
            assert process.stdout is not None
            export = ""
            while not export:
                line = process.stdout.readline()
                assert line, "helmr dev ended before printing how to reach it"
                if line.strip().startswith("export "):
                    export = line.strip().removeprefix("export ")
            yield dict(pair.split("=", 1) for pair in export.split())
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)


def helmr(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env=os.environ | env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_cli_drives_a_session_of_helmr_dev_and_follows_its_events(
    dev_env: dict[str, str],
) -> None:
    started = json.loads(helmr(dev_env, "--json", "session", "start", "echo", "-w", "scratch"))
    session = started["session"]["id"]
    turn = json.loads(helmr(dev_env, "--json", "session", "enqueue", session, '"hi there"'))
    helmr(dev_env, "session", "turn", "wait", session, turn["id"])
    helmr(dev_env, "session", "close", session)

    followed = helmr(dev_env, "session", "events", session, "--follow")

    assert dev_env["HELMR_URL"].startswith("http://127.0.0.1:")
    assert dev_env["HELMR_NAMESPACE"] == "default"
    for kind in ("turn.running", "turn.output", "turn.completed", "session.closed"):
        assert kind in followed
