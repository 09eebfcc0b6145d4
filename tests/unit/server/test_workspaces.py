"""The Workspace routes and their client: read a disk's state, delete it once unheld."""

from __future__ import annotations

import pytest

from helmr.client import Client
from helmr.errors import Conflict
from tests.unit.api import (
    ADMIN,
    NAMESPACE,
    READER,
    Api,
)

WORKSPACE = f"/v1/namespaces/{NAMESPACE}/workspaces/ws"


async def test_a_workspace_reads_its_disk_and_its_holder(api: Api) -> None:
    fresh = await api.call("GET", WORKSPACE, token=READER)
    assert fresh == {
        "id": f"{NAMESPACE}/ws",
        "namespace": NAMESPACE,
        "name": "ws",
        "claim_name": "ws-disk-1",
        "computer_version": None,
        "restored_from": None,
        "pending_saves": 0,
        "held_by": None,
        "forked_from": None,
    }
    sid = await api.start()
    session = await api.call("GET", f"/v1/sessions/{sid}")
    assert session["workspace_id"] == f"{NAMESPACE}/ws"
    assert (await api.call("GET", WORKSPACE))["held_by"] == sid


async def test_a_held_workspace_cannot_be_deleted(api: Api) -> None:
    sid = await api.start()
    refused = await api.call("DELETE", WORKSPACE, status=409)
    assert refused["error"]["code"] == "conflict"
    assert sid in refused["error"]["message"]
    assert api.mirror.deleted_workspaces == []

    await api.call("POST", f"/v1/sessions/{sid}/close", json={})
    deleted = await api.call("DELETE", WORKSPACE)
    assert (deleted["name"], deleted["held_by"]) == ("ws", None)
    assert api.mirror.deleted_workspaces == [f"{NAMESPACE}/ws"]


async def test_deleting_needs_the_delete_verb_on_workspaces(api: Api) -> None:
    refused = await api.call("DELETE", WORKSPACE, token=READER, status=403)
    assert "workspaces.helmr.dev" in refused["error"]["message"]
    assert api.mirror.deleted_workspaces == []


async def test_the_client_reaches_a_workspace_by_the_sessions_workspace_id(api: Api) -> None:
    async with Client(api.url, ADMIN) as client:
        session, _ = await client.actors.start("reviewer", namespace=NAMESPACE, workspace="ws")
        assert session.state is not None
        workspace = client.workspaces.ref(session.state.workspace_id)
        assert (await workspace.retrieve()).held_by == session.id
        with pytest.raises(Conflict, match=session.id):
            await workspace.delete()
        await session.cancel()
        assert (await workspace.delete()).name == "ws"
        with pytest.raises(ValueError, match="namespace"):
            client.workspaces.ref("ws")
