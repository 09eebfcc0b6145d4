"""Computer disk pressure with a real PVC and a real runner pod (spec/002
``session.storage_pressure``): a Turn that fills the disk past ``pauseAt`` pauses
the Session, queued Turns wait until ``resume`` acknowledges it, and a Turn that
frees the space resolves the episode.

The runner measures its mount every second here (``usageIntervalSeconds: 1``);
the local hostpath CSI driver does not enforce the claim's 20Mi, so it counts the
blocks of the files it holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client

from helmr.client import Client, SessionRef
from helmr.resources import GROUP, SESSIONS, VERSION

from .sessions import all_events, create_actor, event_data, eventually

MIB = 1 << 20
SIZE = 20 * MIB


async def _pressure(session: SessionRef) -> list[dict[str, Any]]:
    return event_data(await all_events(session), "session.storage_pressure")


async def test_a_full_disk_pauses_queued_turns_until_resumed_and_freeing_it_resolves(
    helmr: Client, api_client: client.ApiClient, namespace: str, runner_image: str
) -> None:
    create_actor(
        api_client,
        namespace,
        runner_image,
        "files",
        entrypoint="files:files",
        computer={"size": "20Mi", "usageIntervalSeconds": 1},
    )
    session, _ = await helmr.actors.start("files", namespace=namespace, workspace="ws")

    # 18.5 of 20 MiB: past pauseAt (0.9), short of stopAt (0.98).
    filler = await session.enqueue({"fill": {"big.bin": int(18.5 * MIB)}})
    assert (await filler.wait(timeout=180)).status == "completed"
    [paused] = await eventually(
        lambda: _pressure(session), timeout=60, what="session.storage_pressure paused"
    )
    assert paused["state"] == "paused"
    assert paused["capacityBytes"] == SIZE
    assert 0.9 * SIZE <= paused["usedBytes"] < 0.98 * SIZE
    state = await session.retrieve()
    held = state.hold
    assert held is not None
    assert (held.reason, held.hold_id) == ("storage_pressure", paused["holdId"])
    # kubectl sees why: a nearly full disk, not the recovery gap's lost work.
    condition = await eventually(
        lambda: _held_condition(api_client, namespace, state.name),
        timeout=60,
        what="the Session's Held condition",
    )
    assert condition["reason"] == "StoragePressure"
    assert "the Computer disk is nearly full" in condition["message"]
    assert "lost" not in condition["message"]
    assert f"spec.resume.holdId: {held.hold_id}" in condition["message"]

    # Queued work waits while the Session is paused.
    cleaner = await session.enqueue({"remove": ["big.bin"], "size": ["big.bin"]})
    await asyncio.sleep(5)
    assert (await cleaner.retrieve()).status == "queued"

    # The acknowledgement lets it run: it frees the space, and the episode resolves.
    await session.resume(hold_id=paused["holdId"])
    done = await cleaner.wait(timeout=120)
    assert (done.status, done.result) == ("completed", {"read": {}, "size": {"big.bin": None}})
    _, resolved = await eventually(
        lambda: _twice(session), timeout=60, what="session.storage_pressure resolved"
    )
    assert resolved["state"] == "resolved"
    assert resolved["usedBytes"] < 0.85 * SIZE
    assert resolved["holdId"] == paused["holdId"]
    assert (await session.retrieve()).hold is None
    events = await all_events(session)
    pressure = [e for e in events if e.kind == "session.storage_pressure"]
    assert len(pressure) == 2  # once per transition, however often the runner reported
    [resume] = [e for e in events if e.kind == "session.resume"]
    assert pressure[0].sequence < resume.sequence < pressure[1].sequence


def _held_condition(
    api_client: client.ApiClient, namespace: str, name: str
) -> dict[str, Any] | None:
    """The Session resource's ``Held`` condition, once it is True."""
    cr: dict[str, Any] = client.CustomObjectsApi(api_client).get_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, SESSIONS, name
    )
    conditions = (cr.get("status") or {}).get("conditions") or []
    held = [c for c in conditions if c["type"] == "Held" and c["status"] == "True"]
    return held[0] if held else None


async def _twice(session: SessionRef) -> list[dict[str, Any]] | None:
    found = await _pressure(session)
    return found if len(found) >= 2 else None
