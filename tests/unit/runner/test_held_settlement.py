"""A held settlement (runner protocol 5, issue 31): a settlement's ``next`` with a
``timeout`` waits for a turn as a ``receive`` would when none is queued, so a runner
serving turns one at a time makes one request per turn (the enqueue is the other).
The settlement commits first (the reply's head) and the wait never undoes it; a
reply lost with its connection loses nothing."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from aiohttp import ClientResponse

from helmr.events import EventKind
from helmr.protocol import EPOCH_HEADER, CompleteRequest, ReceiveRequest
from helmr.runner import Session
from helmr.runner.http import Heard
from tests.compose import serving
from tests.unit.api import Api
from tests.unit.runner.against_app import RecordingTransport, answered, runner_session

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

TURNS = 6
IDLE = 0.5


async def _finish(session: Session, done: asyncio.Queue[str]) -> None:
    """The usual actor loop, telling ``done`` of each turn it completed."""
    while (turn := await session.receive()) is not None:
        await turn.complete()
        done.put_nowait(turn.id)


@pytest.mark.parametrize(("protocol", "per_turn"), [(4, 3), (5, 2)])
async def test_a_no_op_turn_one_at_a_time_is_two_requests(
    api: Api, protocol: int, per_turn: int
) -> None:
    """Revision 5: the enqueue and the settlement whose held reply brought the turn.
    The previous revision, against this server as before: the enqueue, the receive,
    the settlement (whose ``next`` found nothing queued)."""
    sid = await api.start()
    done: asyncio.Queue[str] = asyncio.Queue()
    async with runner_session(api, sid, protocol=protocol) as session:
        actor = asyncio.create_task(_finish(session, done))
        try:
            # Two turns first: the actor has then asked for a turn after settling one.
            for _ in range(2):
                assert await api.enqueue(sid) == await done.get()
            before = await answered(api)
            for _ in range(TURNS):
                assert await api.enqueue(sid) == await done.get()
            after = await answered(api)
        finally:
            actor.cancel()
            await asyncio.gather(actor, return_exceptions=True)
    counted = after - before
    assert counted.total() == per_turn * TURNS, counted
    assert counted["/v1/sessions/{session_id}/turns"] == TURNS


async def _running(api: Api) -> tuple[str, str, dict[str, str]]:
    """A new Session's first turn, running: the Session's id, the turn's, and the
    headers of its runner's calls."""
    sid = await api.start()
    await api.enqueue(sid)
    first, headers = await api.run_turn(sid)
    return sid, first, headers


def _complete(sid: str, turn_id: str) -> str:
    return f"/runner/v1/sessions/{sid}/turns/{turn_id}/complete"


def _held(**asked: Any) -> dict[str, Any]:
    return {"result": "r", "next": {"timeout": 5, **asked}}


async def _kinds(api: Api, sid: str, turn_id: str) -> list[str]:
    page = await api.control.list_events(sid)
    return [e.kind for e in page.records if e.turn_id == turn_id]


async def _settled_first(api: Api, sid: str, turn_id: str, reply: ClientResponse) -> None:
    """The reply's head has come, its body not yet: the settlement has committed."""
    assert reply.status == 200
    assert not reply.content.at_eof()
    assert (await api.control.get_turn(sid, turn_id)).status == "completed"


async def test_a_held_reply_brings_the_turn_enqueued_during_its_wait(api: Api) -> None:
    sid, first, headers = await _running(api)
    path = _complete(sid, first)
    async with api.http.post(path, json=_held(tags=["t"]), headers=headers) as reply:
        await _settled_first(api, sid, first, reply)
        second = await api.enqueue(sid)
        body = await reply.json()
    assert body["ok"] is True
    assert body["next"]["id"] == second
    assert (await api.control.get_turn(sid, second)).status == "running"
    page = await api.control.list_events(sid)
    [running] = [e.data for e in page.records if e.kind == EventKind.TURN_RUNNING][1:]
    assert running == {"processEpoch": int(headers[EPOCH_HEADER]), "tags": ["t"]}
    # The turn the held reply started was lost with its reply: the same settlement
    # again answers it, as a receive would, and starts nothing more.
    again = await api.call("POST", path, headers=headers, json=_held(tags=["t"]))
    assert again["next"]["id"] == second
    assert await _kinds(api, sid, second) == [EventKind.TURN_QUEUED, EventKind.TURN_RUNNING]
    assert await _kinds(api, sid, first) == [
        EventKind.TURN_QUEUED,
        EventKind.TURN_RUNNING,
        EventKind.TURN_COMPLETED,
    ]


async def test_a_held_reply_answers_none_yet_at_its_timeout(api: Api) -> None:
    sid, first, headers = await _running(api)
    path = _complete(sid, first)
    body = {"next": {"timeout": 0.2}}
    async with api.http.post(path, json=body, headers=headers) as reply:
        await _settled_first(api, sid, first, reply)
        assert await reply.json() == {"ok": True, "next": None}
    # Repeated, the settlement stands (answered again), and waits again.
    assert await api.call("POST", path, headers=headers, json=body) == {"ok": True, "next": None}
    assert (await api.control.get_turn(sid, first)).result is None


@pytest.mark.parametrize("stop", ["close", "cancel"])
async def test_a_held_reply_ends_when_the_session_stops(api: Api, stop: str) -> None:
    """As a waiting receive: the process gets no more turns (``{"closed": true}``)."""
    sid, first, headers = await _running(api)
    path = _complete(sid, first)
    async with api.http.post(path, json=_held(), headers=headers) as reply:
        await _settled_first(api, sid, first, reply)
        await getattr(api.control, stop)(sid)
        assert await reply.json() == {"ok": True, "next": {"closed": True}}


async def test_a_held_reply_of_a_fenced_process_answers_none_yet(api: Api) -> None:
    """A newer process during the wait: the settlement stands, and the receive that
    follows the reply's "none yet" hears that this process is fenced."""
    sid, first, headers = await _running(api)
    path = _complete(sid, first)
    async with api.http.post(path, json=_held(), headers=headers) as reply:
        await _settled_first(api, sid, first, reply)
        await api.control.process_exited(sid, int(headers[EPOCH_HEADER]), 0)
        await api.runner(sid)
        assert await reply.json() == {"ok": True, "next": None}
    receive = f"/runner/v1/sessions/{sid}/receive"
    refused = await api.call("POST", receive, headers=headers, json={"timeout": 1}, status=409)
    assert refused["error"]["code"] == "stale_epoch"


async def test_a_held_reply_its_runner_left_starts_no_turn(api: Api) -> None:
    """The runner left during the wait (its process ending): the turn enqueued then
    stays queued for a process that asks, not started for one gone. Served as in
    production, where a request's handler runs on when its client leaves (the test
    client's server cancels it)."""
    sid, first, headers = await _running(api)
    async with serving(api.app) as url, aiohttp.ClientSession(url) as http:
        async with http.post(_complete(sid, first), json=_held(), headers=headers) as reply:
            await _settled_first(api, sid, first, reply)
            reply.close()  # the connection with it
        # The server sees the connection closed before the next commit wakes its wait.
        await asyncio.sleep(0.1)
        second = await api.enqueue(sid)
        await asyncio.sleep(0.1)  # the wait woke and found no one to answer
    assert (await api.control.get_turn(sid, second)).status == "queued"
    assert await _kinds(api, sid, second) == [EventKind.TURN_QUEUED]


async def test_a_turn_a_held_reply_got_for_an_ending_process_goes_back(api: Api) -> None:
    """``run`` returned after a settlement whose held reply started a turn: the
    runner gives that turn back (the reply brought it, or, cut short, the receive
    it sends then answers it), so it runs next, never lost."""
    sid = await api.start()
    await api.enqueue(sid)
    sent: list[str] = []
    async with runner_session(api, sid, sent=sent) as session:
        first = await session.receive(timeout=5)
        assert first is not None
        await first.complete()
        await api.enqueue(sid)
        second = await session.receive(timeout=5)
        assert second is not None
        await second.complete()  # asks for the next turn: held, none queued
        third = await api.enqueue(sid)
        while (await api.control.get_turn(sid, third)).status != "running":  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # the held reply's wait, woken, starts it
        # The actor's run ends here.
    assert sent[:4] == ["receive", "complete", "receive", "complete"]
    assert sent[-1] == "release"
    assert (await api.control.get_turn(sid, third)).status == "queued"
    assert await _kinds(api, sid, third) == [
        EventKind.TURN_QUEUED,
        EventKind.TURN_RUNNING,
        EventKind.TURN_QUEUED,  # released
    ]


class LosingHeldReplies(RecordingTransport):
    """A wire on which a held settlement's reply is lost, as when the control plane
    stops during its wait: the settlement commits (asking for no next turn, so the
    server holds nothing) and its reply never comes."""

    async def call(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        if isinstance(body, CompleteRequest) and body.next is not None and heard is not None:
            await super().call(path, replace(body, next=None))
            heard(200)
            await asyncio.Event().wait()  # the reply's body never comes
        return await super().call(path, body, wait=wait, heard=heard)


@pytest.mark.parametrize(("protocol", "kinds"), [(5, 3), (6, 1)])
async def test_an_ending_process_whose_held_reply_was_lost_starts_no_queued_turn(
    api: Api, protocol: int, kinds: int
) -> None:
    """``run`` ended while a held reply was lost and a turn came: the receive the runner
    sends to find what the reply may have started (``start: false``, revision 6)
    starts nothing, so the turn stays queued, never ``running`` for a process that
    ends. A runner of revision 5 starts it and gives it back (a second ``turn.running``
    when it runs)."""
    sid = await api.start()
    await api.enqueue(sid)
    sent: list[str] = []
    async with runner_session(
        api, sid, protocol=protocol, sent=sent, transport_type=LosingHeldReplies
    ) as session:
        first = await session.receive(timeout=5)
        assert first is not None
        await first.complete()
        await api.enqueue(sid)
        second = await session.receive(timeout=5)
        assert second is not None
        await second.complete()  # asks for the next turn, held: its reply is lost
        third = await api.enqueue(sid)
        # The actor's run ends here.
    assert (await api.control.get_turn(sid, third)).status == "queued"
    assert len(await _kinds(api, sid, third)) == kinds
    assert sent[-1] == ("release" if protocol == 5 else "receive")


class LosingReceiveReplies(RecordingTransport):
    """A wire on which a ``receive``'s answer is lost as the process ends: the server
    answers (a turn started for it) and the answer never comes."""

    async def call(
        self,
        path: str,
        body: DataclassInstance | None = None,
        *,
        wait: float = 0.0,
        heard: Heard | None = None,
    ) -> Any:
        answer = await super().call(path, body, wait=wait, heard=heard)
        if isinstance(body, ReceiveRequest) and body.start is None:
            await asyncio.Event().wait()  # the answer never comes
        return answer


@pytest.mark.parametrize(("protocol", "status"), [(5, "running"), (6, "queued")])
async def test_a_turn_started_for_a_receive_cut_short_goes_back(
    api: Api, protocol: int, status: str
) -> None:
    """SIGTERM cancelled ``run`` as its ``receive`` was answered: the turn that receive
    started goes back as the process ends (revision 6: ``start: false`` answers it),
    never left ``running`` for a process gone. A runner of revision 5 asks nothing."""
    sid = await api.start()
    sent: list[str] = []
    async with runner_session(
        api, sid, protocol=protocol, sent=sent, transport_type=LosingReceiveReplies
    ) as session:
        actor = asyncio.create_task(session.receive())
        turn = await api.enqueue(sid)
        while (await api.control.get_turn(sid, turn)).status != "running":  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # the receive's wait, woken, starts it
        actor.cancel()  # as SIGTERM cancels run
        await asyncio.gather(actor, return_exceptions=True)
    assert (await api.control.get_turn(sid, turn)).status == status
    given_back = [EventKind.TURN_QUEUED, EventKind.TURN_RUNNING, EventKind.TURN_QUEUED]
    assert await _kinds(api, sid, turn) == given_back[: 3 if protocol == 6 else 2]
    assert sent[-1] == ("release" if protocol == 6 else "receive")


async def test_a_receive_asked_not_to_start_answers_only_the_turn_already_started(
    api: Api,
) -> None:
    """``start: false`` (revision 6): a queued turn is not started (408 at once, nothing
    waited for); the turn already running for this process is answered."""
    sid, first, headers = await _running(api)
    receive = f"/runner/v1/sessions/{sid}/receive"
    asked = {"timeout": 60, "start": False}
    again = await api.call("POST", receive, headers=headers, json=asked)
    assert again["id"] == first
    await api.call("POST", _complete(sid, first), headers=headers, json={})
    second = await api.enqueue(sid)
    refused = await api.call("POST", receive, headers=headers, json=asked, status=408)
    assert refused["error"]["code"] == "receive_timeout"
    assert await _kinds(api, sid, second) == [EventKind.TURN_QUEUED]


async def test_a_held_reply_s_wait_is_part_of_the_idle_wait(api: Api) -> None:
    """The actor's ``receive`` after a held settlement returns None (the process may
    end) one idle timeout after it was called, not one after the held reply's end."""
    sid = await api.start()
    for _ in range(2):
        await api.enqueue(sid)
    sent: list[str] = []
    loop = asyncio.get_running_loop()
    async with runner_session(api, sid, sent=sent, idle_timeout=IDLE) as session:
        for _ in range(2):  # the second settlement's reply is held: none queued
            turn = await session.receive(timeout=5)
            assert turn is not None
            await turn.complete()
        began = loop.time()
        assert await session.receive() is None
        took = loop.time() - began
    assert IDLE <= took < 1.8 * IDLE
    assert sent[:4] == ["receive", "complete", "receive", "complete"]
