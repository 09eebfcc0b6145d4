"""A Session applied with kubectl opens with the controls its spec asks: a level
(``spec.state``) and a request (``spec.interrupt``, which holds it) alike, since
every field of a new resource is new. A restart's resume asks the request again
of no Session."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any, cast

from helmr.control import SessionView
from helmr.operator.kopf import handlers
from helmr.operator.kopf.waiting_turns import WaitingTurns
from helmr.operator.mirror.custom_resources import CustomResourceMirror
from helmr.resources import API_VERSION, SessionStatus
from tests.unit.control.harness import Harness
from tests.unit.operator.test_status_writes import SlowKube, admitted_session, mirroring

UID = "u-session"


async def admit(
    h: Harness,
    spec: dict[str, Any],
    *others: SessionView,
    kube: SlowKube | None = None,
    waiting: WaitingTurns | None = None,
) -> SlowKube:
    """The operator's ``session_admit`` for a Session applied with kubectl, beside the
    admitted Session resources of ``others`` (in ``kube``, if given, with the Turns
    ``waiting`` for their Sessions); returns the apiserver it wrote to."""
    if kube is None:
        kube, _, _ = mirroring(h)
    mirror = CustomResourceMirror(kube)
    for view in others:
        admitted_session(kube, view)
    plane = SimpleNamespace(
        kube=kube,
        control=h.control,
        mirror=mirror,
        supervisor=SimpleNamespace(wake=lambda: None),
        traces=None,  # tracing off (helmr.operator.telemetry.turn_traces)
    )
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "Session",
        "metadata": {"name": "held", "namespace": "team", "uid": UID, "generation": 1},
        "spec": {"actorRef": {"name": "reviewer"}, "workspace": "ws-held", **spec},
    }
    # kopf types its decorated handlers as its own callback protocol.
    session_admit = cast(Callable[..., Coroutine[Any, Any, None]], handlers.session_admit)
    await session_admit(
        body=body,
        name="held",
        namespace="team",
        uid=UID,
        labels={},
        memo={"control_plane": plane, "waiting_turns": waiting or WaitingTurns()},
    )
    return kube


async def admitted(h: Harness) -> SessionView:
    """The store's Session the admission opened (its idempotency key finds it)."""
    return await h.control.open_session(
        namespace="team",
        name="held",
        actor="reviewer",
        workspace="ws-held",
        idempotency_key=f"k8s:{UID}",
    )


async def test_a_session_created_with_an_interrupt_opens_held(h: Harness) -> None:
    await admit(h, {"interrupt": "2026-12-03T14:00:00Z"})

    view = await admitted(h)
    assert view.status == "open"
    assert view.hold is not None
    assert view.hold.reason == "interrupt"


async def test_a_session_created_without_one_opens_unheld(h: Harness) -> None:
    await admit(h, {})

    view = await admitted(h)
    assert (view.status, view.hold) == ("open", None)


async def test_a_fork_of_a_turn_with_no_save_fails_saying_why(h: Harness) -> None:
    source = await h.session()

    kube = await admit(h, {"forkFrom": {"session": source.name, "turn": "turn_unknown"}}, source)

    status = kube.statuses[("Session", "held")]
    assert isinstance(status, SessionStatus)
    assert status.phase == "failed"
    failed = [c for c in status.conditions or () if c.type == "Failed"]
    assert [(c.status, c.reason) for c in failed] == [("True", "ForkRefused")]
    [(what, reason, message, warning)] = kube.events
    assert (what, reason, warning) == ("Session/held", "ForkRefused", True)
    assert message.startswith("spec.forkFrom refused: ")
