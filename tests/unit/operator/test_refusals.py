"""What the operator refuses of a kubectl user, told on the resource (issue 25,
items 1 and 2): a Turn applied for a Session that admits no Turns ends failed
with its reason, condition and one Warning Event, and is never tried again; a
refused Session control leaves one Warning Event and ``status.lastRefused``."""

from __future__ import annotations

from typing import Any

import pytest

from helmr.operator.mirror.conditions import camel
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.operator.mirror.refusals import CONTROL_REFUSED, Refusal, tell_refused
from helmr.resources import API_VERSION, Session, SessionStatus, TurnStatus
from tests.unit.control.harness import Harness
from tests.unit.operator.test_status_writes import (
    KUBECTL_TURN,
    SlowKube,
    admit_kubectl_turn,
    admitted_session,
)


def session_resource(status: SessionStatus | None = None) -> Session:
    manifest: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Session",
        "metadata": {"name": "review", "namespace": "team", "uid": "u-s"},
        "spec": {"actorRef": {"name": "echo"}, "workspace": "ws"},
    }
    if status is not None:
        manifest["status"] = status.to_wire()
    return Session.from_manifest(manifest)


MISMATCH = Refusal("spec.resume", "HoldMismatch", "spec.resume.holdId h1 is not ...")
CLOSED = Refusal("spec.interrupt", "SessionClosed", "spec.interrupt 2: the Session is closed")


async def test_a_refusal_is_told_once_by_an_event_and_the_status() -> None:
    kube = SlowKube()
    await tell_refused(kube, session_resource(), [MISMATCH])
    assert kube.events == [("Session/review", CONTROL_REFUSED, MISMATCH.message, True)]
    status = kube.statuses[("Session", "review")]
    assert isinstance(status, SessionStatus)
    assert status.last_refused is not None
    told = status.last_refused
    assert (told.control, told.reason, told.message) == (
        "spec.resume",
        "HoldMismatch",
        MISMATCH.message,
    )
    # Only lastRefused is patched: the status sync's fields are left alone.
    assert set(status.status_patch()["status"]) == {"lastRefused"}

    # Told again (kopf's retry, a restart's levels): the status shows it, nothing more.
    again = SlowKube()
    await tell_refused(again, session_resource(status), [MISMATCH])
    await tell_refused(again, session_resource(status), [])
    assert (again.events, again.log) == ([], [])

    # Another refusal is new: told, and it is the last one now.
    await tell_refused(again, session_resource(status), [MISMATCH, CLOSED])
    assert [message for _, _, message, _ in again.events] == [CLOSED.message]
    last = again.statuses[("Session", "review")]
    assert isinstance(last, SessionStatus)
    assert last.last_refused is not None
    assert last.last_refused.reason == "SessionClosed"


@pytest.mark.parametrize(
    ("end", "code", "state"),
    [
        ("close", "session_closed", "is closed (after its queued Turns finished)"),
        ("fail", "session_failed", "has failed (actor init failed)"),
        ("cancel", "session_closing", "is being cancelled"),
    ],
)
async def test_a_turn_for_a_session_that_admits_none_ends_failed_once(
    h: Harness, end: str, code: str, state: str
) -> None:
    reason = camel(code)
    kube = SlowKube()
    mirror = CustomResourceMirror(kube)
    session = await h.session()
    if end == "cancel":
        await h.running(session.id)  # so that the cancel waits for its Turn
        await h.control.cancel(session.id)
    elif end == "close":
        await h.control.close(session.id)
    else:
        await h.control.fail_session(session.id, "actor_init_failed")
    admitted_session(kube, session)

    await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name)  # no retry

    status = kube.statuses[("Turn", KUBECTL_TURN)]
    assert isinstance(status, TurnStatus)
    message = (
        f"Turn {KUBECTL_TURN} was not admitted: the Session {session.name} {state}"
        " and admits no Turns"
    )
    assert status.phase == "failed"
    assert status.ended_at is not None
    assert status.error is not None
    assert (status.error.code, status.error.message) == ("session_not_open", message)
    assert status.reason == code
    [failed] = status.conditions or []
    assert (failed.type, failed.status, failed.reason, failed.message) == (
        "Failed",
        "True",
        reason,
        message,
    )
    assert kube.events == [(f"Turn/{KUBECTL_TURN}", reason, message, True)]
    assert (await h.control.get_session(session.id)).queued_turns == 0

    # Resumed after a restart, the failed Turn is never admitted again, nor told again.
    kube.events.clear()
    await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name, status)
    assert kube.events == []
    assert (await h.control.get_session(session.id)).queued_turns == 0
