"""A Session in a namespace being deleted ends, and stalls no other (issue 9, item 7b).

The apiserver refuses every create in a terminating namespace with 403 and the
cause ``NamespaceTerminating``: the supervisor and the status sync end such a
Session (``failed``, reason ``namespace_terminating``) instead of retrying it
every pass, and go on with the others.
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from helmr.control import SessionView
from helmr.kube.client import namespace_terminating
from helmr.kube.errors import KubeError, translated
from helmr.operator.mirror.custom_resources import CustomResourceMirror, turn_cr_name
from helmr.operator.mirror.status_sync import StatusSync
from helmr.operator.runners.identity import RunnerPods
from helmr.operator.runners.supervisor import Supervisor
from helmr.operator.settings import Settings
from helmr.operator.telemetry.metrics import OperatorMetrics
from helmr.resources import TurnStatus
from helmr.states import ErrorInfo, FailureReason
from tests.unit.control.harness import Harness
from tests.unit.operator.stub_kube import DYING, ClusterKube, terminating

FAILURE = ErrorInfo(code="boom", message="failed")


async def dying_session(h: Harness) -> SessionView:
    return await h.control.open_session(
        namespace=DYING, name="s-dying", actor="reviewer", workspace="ws-dying"
    )


def not_found(kind: str, name: str) -> KubeError:
    """The apiserver's 404, as a create in a namespace that is gone gets it for the namespace."""
    error = ApiException(status=404, reason="Not Found")
    error.body = json.dumps(
        {
            "kind": "Status",
            "status": "Failure",
            "message": f'{kind} "{name}" not found',
            "reason": "NotFound",
            "details": {"name": name, "kind": kind},
            "code": 404,
        }
    )
    return translated(error)


def test_only_a_refusal_for_a_terminating_or_gone_namespace_is_recognised() -> None:
    assert namespace_terminating(terminating("x"))
    assert namespace_terminating(not_found("namespaces", "x"))
    assert not namespace_terminating(not_found("pods", "x"))
    assert not namespace_terminating(translated(ApiException(status=404, reason="Not Found")))
    assert not namespace_terminating(translated(ApiException(status=403, reason="Forbidden")))
    assert not namespace_terminating(translated(ApiException(status=500, reason="boom")))
    assert not namespace_terminating(RuntimeError("403 NamespaceTerminating"))


async def test_the_supervisor_ends_a_session_in_a_terminating_namespace_and_starts_the_others(
    h: Harness,
) -> None:
    kube = ClusterKube()
    supervisor = Supervisor(h.control, kube, RunnerPods(), Settings(), OperatorMetrics())
    dying = await dying_session(h)
    queued = await h.control.enqueue(dying.id, "never runs")
    other = await h.session()
    await h.control.enqueue(other.id, "runs")

    await supervisor.reconcile()

    assert kube.created == ["team/claim", "team/serviceaccount", "team/pod"]
    ended = await h.control.get_session(dying.id)
    assert ended.status == "failed"
    assert ended.failure_reason == FailureReason.NAMESPACE_TERMINATING
    assert (await h.control.get_turn(dying.id, queued.id)).status == "cancelled"
    assert (await h.control.get_session(other.id)).process_live

    refused = list(kube.refused)
    await supervisor.reconcile()
    assert kube.refused == refused  # not tried again


async def test_the_status_sync_ends_a_session_in_a_terminating_namespace_and_mirrors_the_others(
    h: Harness,
) -> None:
    kube = ClusterKube()
    sync = StatusSync(
        h.control, CustomResourceMirror(kube), OperatorMetrics(), wake=lambda changed: None
    )
    dying = await dying_session(h)
    dying_epoch, dying_turn = await h.running(dying.id)
    other = await h.session()
    epoch, turn = await h.running(other.id)
    # Both Turns fail: a Kubernetes Event is recorded for each (and refused in DYING).
    await h.control.fail(dying.id, dying_epoch, dying_turn.id, FAILURE)
    await h.control.fail(other.id, epoch, turn.id, FAILURE)

    await sync.sync(await h.control.changed_sessions(timeout=0))

    mirrored = kube.statuses[("Turn", turn_cr_name(turn.id))]
    assert isinstance(mirrored, TurnStatus)
    assert mirrored.phase == "failed"
    assert "team/event" in kube.created
    ended = await h.control.get_session(dying.id)
    assert ended.status == "failed"
    assert ended.failure_reason == FailureReason.NAMESPACE_TERMINATING

    # Its end is mirrored once more (the status patch is allowed), and then nothing is left.
    await sync.sync(await h.control.changed_sessions(timeout=0))
    refused = list(kube.refused)
    await sync.sync(await h.control.changed_sessions(timeout=0))
    assert kube.refused == refused
