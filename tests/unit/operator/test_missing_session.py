"""A Turn applied with kubectl naming a Session that does not exist waits for it,
saying so once in a Warning Event, and asks again less and less often: each ask
is an apiserver write (kopf's progress annotation), so a typo in ``sessionRef``
must not cost one every second for ever. A Turn for a Session that failed before
it opened (a refused fork) fails at once."""

from __future__ import annotations

import kopf
import pytest

from helmr.operator.kopf.handlers import MISSING_SESSION_MAX_DELAY
from helmr.operator.kopf.waiting_turns import WaitingTurns
from helmr.resources import Session, TurnStatus
from tests.unit.control.harness import Harness
from tests.unit.operator.test_session_admit import admit, admitted
from tests.unit.operator.test_status_writes import (
    KUBECTL_TURN,
    admit_kubectl_turn,
    admitted_session,
    mirroring,
)


async def test_a_turn_naming_a_missing_session_waits_saying_which_and_backs_off(
    h: Harness,
) -> None:
    kube, mirror, _ = mirroring(h)
    delays: list[float] = []
    for retry in range(8):
        with pytest.raises(kopf.TemporaryError) as waiting:
            await admit_kubectl_turn(h, kube, mirror, "team-a", "no-such-session", retry=retry)
        assert "Session no-such-session does not exist in namespace team-a" in str(waiting.value)
        assert waiting.value.delay is not None
        delays.append(waiting.value.delay)

    assert delays[0] <= 1
    assert delays == sorted(delays)
    assert delays[-1] == MISSING_SESSION_MAX_DELAY
    assert kube.turn_phase(KUBECTL_TURN) is None  # nothing admitted, nothing written
    assert kube.events == [
        (
            f"Turn/{KUBECTL_TURN}",
            "SessionNotFound",
            "Session no-such-session does not exist in namespace team-a:"
            " the Turn is admitted once it is created",
            True,
        )
    ]


async def test_the_waiting_turn_is_admitted_once_its_session_exists(h: Harness) -> None:
    kube, mirror, _ = mirroring(h)
    session = await h.session()
    with pytest.raises(kopf.TemporaryError):
        await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name, retry=5)

    admitted_session(kube, session)
    await admit_kubectl_turn(h, kube, mirror, session.namespace, session.name, retry=6)

    page = await h.control.list_events(session.id)
    assert [event.kind for event in page.records] == ["turn.queued"]


async def test_a_turn_for_a_session_that_failed_before_it_opened_fails(h: Harness) -> None:
    kube, mirror, _ = mirroring(h)
    kube.sessions["refused"] = Session.model_validate(
        {
            "metadata": {"name": "refused", "namespace": "team"},
            "spec": {"actorRef": {"name": "reviewer"}, "workspace": "ws"},
            "status": {"phase": "failed"},
        }
    )

    await admit_kubectl_turn(h, kube, mirror, "team", "refused")

    status = kube.statuses[("Turn", KUBECTL_TURN)]
    assert isinstance(status, TurnStatus)
    assert (status.phase, status.reason) == ("failed", "session_failed")
    assert status.error is not None
    assert status.error.code == "session_not_open"
    [(_, reason, message, warning)] = kube.events
    assert warning
    assert reason == "SessionFailed"
    assert "the Session refused failed before it opened" in message


async def test_a_waiting_turn_is_admitted_by_its_sessions_admission(h: Harness) -> None:
    # kopf's next ask could be 30 s away: the Session's admission admits the Turn.
    kube, mirror, _ = mirroring(h)
    waiting = WaitingTurns()
    with pytest.raises(kopf.TemporaryError):
        await admit_kubectl_turn(h, kube, mirror, "team", "held", retry=5, waiting=waiting)

    await admit(h, {}, kube=kube, waiting=waiting)

    page = await h.control.list_events((await admitted(h)).id)
    assert [event.kind for event in page.records] == ["turn.queued"]
    assert waiting.take("team", "held") == {}  # admitted once, forgotten


async def test_a_waiting_turn_deleted_before_its_session_came_is_not_admitted(
    h: Harness,
) -> None:
    kube, mirror, _ = mirroring(h)
    waiting = WaitingTurns()
    with pytest.raises(kopf.TemporaryError):
        await admit_kubectl_turn(h, kube, mirror, "team", "held", waiting=waiting)
    del kube.turns[KUBECTL_TURN]

    await admit(h, {}, kube=kube, waiting=waiting)

    page = await h.control.list_events((await admitted(h)).id)
    assert page.records == []


def test_a_turn_that_found_its_session_by_itself_no_longer_waits() -> None:
    waiting = WaitingTurns()
    waiting.wait("team", "held", "first", "u-1")
    waiting.wait("team", "held", "second", "u-2")
    waiting.wait("team", "other", "third", "u-3")

    waiting.found("team", "held", "first")

    assert waiting.take("team", "held") == {"second": "u-2"}
    assert waiting.take("team", "held") == {}
    assert waiting.take("team", "other") == {"third": "u-3"}
