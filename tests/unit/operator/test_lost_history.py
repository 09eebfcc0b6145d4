"""A Session whose history the store lost (``helmr.operator.mirror.lost_history``), over a
stub Kube and a real store: issue 9 item 8, "a Session whose CR shows it existed
but whose history the store no longer has ends failed ... and new Turns for it
are refused with the same reason"; spec/000 "Helmr never replays a completed,
interrupted or failed Turn"."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.operator.mirror.lost_history import (
    HistoryLost,
    admitted,
    fail_session,
    refuse_turn,
)
from helmr.resources import GROUP, TURNS, VERSION, Session, SessionStatus, Turn, TurnStatus
from helmr.states import FailureReason
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import StubKube


def session(session_id: str | None, **status: Any) -> Session:
    manifest: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Session",
        "metadata": {"name": "demo", "namespace": "team"},
        "spec": {"actorRef": {"name": "echo"}, "workspace": "ws"},
    }
    if session_id is not None:
        manifest["status"] = {"sessionId": session_id, **status}
    return Session.from_manifest(manifest)


def turn(name: str, session_name: str = "demo", phase: str | None = None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Turn",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"sessionRef": {"name": session_name}, "input": name},
    }
    if phase is not None:
        manifest["status"] = {"phase": phase, "turnId": f"turn_{name}", "sequence": 1}
    return manifest


class TurnsApi:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        assert args[-1] == TURNS
        return {"items": self.items}


def kube_with(*turns: dict[str, Any]) -> StubKube:
    kube = StubKube()
    kube.custom = TurnsApi(list(turns))  # type: ignore[assignment]
    return kube


async def test_only_an_admitted_session_the_store_lacks_has_lost_its_history(h: Harness) -> None:
    known = await h.session()

    with pytest.raises(HistoryLost, match="ses_gone"):
        await admitted(h.control, session("ses_gone"))
    view = await admitted(h.control, session(known.id))
    assert view is not None
    assert view.id == known.id
    assert await admitted(h.control, session(None)) is None  # not admitted yet


async def test_the_lost_session_fails_and_its_unended_turns_with_it() -> None:
    kube = kube_with(
        turn("demo-1", phase="completed"),
        turn("demo-2", phase="queued"),
        turn("demo-3"),
        turn("other-1", session_name="other"),
    )

    await fail_session(kube, session("ses_gone", phase="open"))

    status = kube.statuses[("Session", "demo")]
    assert isinstance(status, SessionStatus)
    assert status.phase == "failed"
    conditions = {c.type: c for c in status.conditions or []}
    assert (conditions["Failed"].status, conditions["Failed"].reason) == ("True", "HistoryLost")
    assert "ses_gone" in conditions["Failed"].message
    assert (conditions["Ready"].status, conditions["Ready"].reason) == ("False", "HistoryLost")
    # The completed Turn keeps its outcome; another Session's Turn is not touched.
    assert set(kube.statuses) == {("Session", "demo"), ("Turn", "demo-2"), ("Turn", "demo-3")}
    for name in ("demo-2", "demo-3"):
        failed = kube.statuses[("Turn", name)]
        assert isinstance(failed, TurnStatus)
        assert (failed.phase, failed.reason) == ("failed", FailureReason.HISTORY_LOST)
        assert failed.error is not None
        assert failed.error.code == FailureReason.HISTORY_LOST
    assert kube.log.count("event") == 3  # one Warning Event per resource


async def test_a_session_already_failed_for_it_is_written_once() -> None:
    kube = kube_with()
    await fail_session(kube, session("ses_gone", phase="open"))
    written = kube.statuses[("Session", "demo")].to_wire()

    again = kube_with()
    await fail_session(again, session("ses_gone", **written))

    assert again.log == []


async def test_an_ended_turn_is_never_refused_or_rewritten() -> None:
    kube = kube_with()
    for phase in ("completed", "failed", "interrupted", "cancelled"):
        await refuse_turn(kube, Turn.from_manifest(turn("t", phase=phase)), session("ses_gone"))

    assert kube.log == []
