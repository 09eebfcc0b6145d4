"""The runner protocol's revision: the operator tells its runner pods which one the
control plane speaks (``HELMR_PROTOCOL``), and a runner without it assumes the first,
so an actor image and a control plane of different Helmr versions work together."""

from __future__ import annotations

from pathlib import Path

import pytest

from helmr.operator.runners import pods
from helmr.protocol import contract
from helmr.runner.entrypoint import Config
from tests.unit.operator.test_volumes import _runner_spec as runner_spec


def _environ(tmp_path: Path, **more: str) -> dict[str, str]:
    token = tmp_path / "token"
    token.write_text("t")
    return {
        contract.ENV_URL: "http://cp",
        contract.ENV_SESSION_ID: "ses_1",
        contract.ENV_TOKEN_FILE: str(token),
        contract.ENV_PROCESS_EPOCH: "1",
        contract.ENV_ENTRYPOINT: "m:a",
        **more,
    }


def test_runner_pods_are_told_the_revision_this_control_plane_speaks() -> None:
    [container] = pods.build_runner_pod_spec(runner_spec())["spec"]["containers"]
    assert {"name": contract.ENV_PROTOCOL, "value": str(contract.PROTOCOL)} in container["env"]
    assert contract.PROTOCOL == 6


@pytest.mark.parametrize(("value", "revision"), [(None, 1), ("1", 1), ("2", 2), ("7", 7)])
def test_a_runner_reads_the_revision_and_assumes_the_first_without_one(
    tmp_path: Path, value: str | None, revision: int
) -> None:
    more = {} if value is None else {contract.ENV_PROTOCOL: value}
    assert Config.from_environ(_environ(tmp_path, **more)).protocol == revision
