"""A busy runner process, ``python -m helmr.runner`` as a runner pod runs it, against
the real app: with turns queued it makes one request per turn, its stop channel
included (issue 31). The stop channel's long poll stays open across the turn
boundary: a turn its process settled itself is no answer while the process runs
the next one, and a stop of that next one answers it."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path

from helmr.protocol import contract
from tests.unit.api import Api
from tests.unit.runner.against_app import answered

TURNS = 12

ACTORS = """
from helmr.runner import actor


async def finish(session):
    while (turn := await session.receive()) is not None:
        await turn.complete({"done": turn.input})


finishes = actor(id="finishes", run=finish)
"""


async def _runner_requests(api: Api) -> Counter[str]:
    """The runner requests the app answered, by route (``receive``, ``stops``...)."""
    runner: Counter[str] = Counter()
    for route, count in (await answered(api)).items():
        if route.startswith("/runner/"):
            runner[route.rsplit("/", 1)[1]] += count
    return runner


async def _start_runner(api: Api, sid: str, tmp_path: Path) -> asyncio.subprocess.Process:
    headers = await api.runner(sid)
    (tmp_path / "busy_actors.py").write_text(ACTORS)
    (tmp_path / "token").write_text(headers["Authorization"].removeprefix("Bearer "))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELMR_")}
    env.update(
        {
            contract.ENV_URL: api.runner_url,
            contract.ENV_SESSION_ID: sid,
            contract.ENV_TOKEN_FILE: str(tmp_path / "token"),
            contract.ENV_PROCESS_EPOCH: headers["Helmr-Process-Epoch"],
            contract.ENV_ENTRYPOINT: "busy_actors:finishes",
            contract.ENV_PROTOCOL: str(contract.PROTOCOL),
            # The parent's path after the actor's: the runner is the checkout's under test.
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])
            ),
        }
    )
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "helmr.runner", env=env, stderr=asyncio.subprocess.PIPE
    )


async def test_a_busy_runner_process_makes_one_request_per_turn(api: Api, tmp_path: Path) -> None:
    sid = await api.start()
    last = [await api.enqueue(sid, n) for n in range(TURNS)][-1]
    runner = await _start_runner(api, sid, tmp_path)
    try:
        # Bounded only so a hung runner cannot hang the suite; no outcome depends on it.
        async with asyncio.timeout(60):
            # The last Turn's state, read over HTTP: nothing to wait on.
            while (await api.call("GET", f"/v1/sessions/{sid}/turns/{last}"))[  # noqa: ASYNC110
                "status"
            ] != "completed":
                await asyncio.sleep(0.05)
            # The last settlement's reply is held for a next Turn (runner protocol 5), and
            # a request is counted once answered: the close answers it, and the actor's
            # receive then returns None, so the process ends by itself.
            await api.call("POST", f"/v1/sessions/{sid}/close", json={})
            await runner.wait()
    finally:
        if runner.returncode is None:
            runner.terminate()
        _, stderr = await runner.communicate()
        print(stderr.decode())  # shown by pytest when the test fails
    answered = await _runner_requests(api)
    # The first turn's receive, its settlement (which asks for no next turn: the actor
    # has not yet asked for one after settling), the second turn's receive; then each
    # settlement starts the next turn, and the last one's reply is held until the close.
    # The stop channel: a poll for the first turn, ended as its settlement left the process
    # no turn (unless the second had started by then: that poll serves every turn), and
    # one held through every turn the settlements started, ended by the last settlement.
    # A turn whose settlement awaits its reply gets no poll: that settlement may be what
    # ended the last poll (a third poll was sent so, until ``_settlement_answered``).
    assert runner.returncode == 0
    assert answered["complete"] == TURNS
    assert answered["receive"] <= 2
    assert answered["stops"] <= 2
    assert sum(answered.values()) <= TURNS + 4
