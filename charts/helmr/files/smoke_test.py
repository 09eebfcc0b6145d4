"""`helm test`: one session of the echo actor through this release's API.

Runs in the test Pod (charts/helmr/templates/tests/smoke.yaml), on the
control-plane image, which has Helmr's client. It authenticates with the Pod's
own service-account token, as any in-cluster client would, starts a session
owning the release's smoke Workspace, sends one turn, waits for its outcome,
checks the echo and closes the session. Exit status 0 is the test passing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from helmr.client import Client

TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


async def smoke(token: str) -> int:
    namespace, actor = os.environ["SMOKE_NAMESPACE"], os.environ["SMOKE_ACTOR"]
    marker = uuid.uuid4().hex
    async with Client(os.environ["HELMR_URL"], token) as client:
        session, _ = await client.actors.start(
            actor, namespace=namespace, workspace=os.environ["SMOKE_WORKSPACE"]
        )
        print(f"session {session.id} of actor {namespace}/{actor}", flush=True)
        try:
            turn = await session.enqueue({"smoke": marker})
            outcome = await turn.wait(timeout=float(os.environ["SMOKE_TIMEOUT_SECONDS"]))
        finally:
            await session.close()
    print(f"turn {outcome.id}: {outcome.status}, result={outcome.result}", flush=True)
    if outcome.status != "completed" or outcome.result != {"echo": {"smoke": marker}}:
        print("expected a completed turn echoing its input", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(smoke(TOKEN.read_text().strip())))
