"""A Session declared as a fork (``spec.forkFrom``): opened from the save of a
Turn of another Session, found by its resource's name."""

from __future__ import annotations

import kopf

from helmr.control import SessionView
from helmr.control.operator_api import OperatorControl
from helmr.errors import Conflict, NotFound, SaveNotReady
from helmr.kube.client import Kube
from helmr.operator.mirror.refusals import fail_unopened_session
from helmr.resources import Session

SAVE_WAIT_SECONDS = 2
"""How soon a fork whose save is being taken is asked again (kopf retries it)."""
FORK_REFUSED = "ForkRefused"
"""The reason of a refused fork's ``Failed`` condition and Warning Event."""


async def fork_declared(
    control: OperatorControl, kube: Kube, session: Session, idempotency_key: str
) -> SessionView | None:
    """Opens the declared fork. A save still being taken is waited for (kopf asks
    again); a source that is not there, or a Turn with no save of its own, refuses
    the fork for good: the Session ends ``failed``, its ``Failed`` condition and a
    Warning Event saying why, and None is returned."""
    spec = session.spec
    fork = spec.fork_from
    namespace, name = session.metadata.namespace, session.metadata.name
    assert fork is not None
    assert namespace is not None
    assert name is not None
    source = await kube.get_resource(Session, namespace, fork.session)
    source_id = None if source is None or source.status is None else source.status.session_id
    if source_id is None:
        raise kopf.TemporaryError(
            f"spec.forkFrom: Session {fork.session} is not admitted yet", delay=5
        )
    try:
        return await control.fork_session(
            source_id=source_id,
            at_turn=fork.turn,
            name=name,
            workspace=spec.workspace,
            actor=spec.actor_ref.name,
            idempotency_key=idempotency_key,
        )
    except SaveNotReady as e:
        raise kopf.TemporaryError(f"spec.forkFrom: {e}", delay=SAVE_WAIT_SECONDS) from e
    except (Conflict, NotFound) as e:
        await fail_unopened_session(kube, session, FORK_REFUSED, f"spec.forkFrom refused: {e}")
        return None
