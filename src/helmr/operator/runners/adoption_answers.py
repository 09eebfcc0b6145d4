"""What a pooled runner's adoption poll is answered (``helmr.server.runner_api.Adoptions``).

The poll is authenticated by the pod's projected token alone (its pod, by uid, is
what the store's adoption names), waits on the store for the pod's adoption, and
answers the Session, its process epoch and warm wait, and the Session's own settings
(``spec.env`` values, and the values of the Secret keys it names, read in the
Session's namespace only when answering: they are in no log, event, status or row).
The Session's resource and its store view are the ones its adopter held
(:class:`AdoptedSessions`), when this replica adopted it: read again, they would be an
apiserver round trip and a store read on the runner's path.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from helmr.control import SessionView
from helmr.errors import Conflict, Forbidden, ReceiveTimeout
from helmr.kube.client import Kube
from helmr.operator.runners.identity import RunnerPodVerifier
from helmr.operator.runners.pods import RUNNER_SERVICE_ACCOUNT
from helmr.operator.runners.session_settings import SettingsUnavailable, settings_values
from helmr.protocol import AdoptionReply
from helmr.resources import Session
from helmr.resources.session_env import SessionEnv
from helmr.store.rows import AdoptionRow


class AdoptionReads(Protocol):
    """What an answer reads of the store (the API's Control)."""

    async def adoption(self, pod_uid: str, timeout: float) -> AdoptionRow | None:  # noqa: ASYNC109
        """The pod's adoption once there is one; None after ``timeout``."""

    @property
    def get_session(self) -> Callable[[str], Awaitable[SessionView]]:
        """The Session of an id."""


KEPT_SESSIONS = 1024
"""Adopters' Session resources kept for their pods' answers at most (a pod that never
asks again, its runner gone, leaves its entry to be dropped, oldest first)."""


@dataclass(frozen=True, slots=True)
class Adopter:
    """The Session an adoption was made for, as its adopter held it: its store view
    (its limits resolved) and its resource."""

    view: SessionView
    resource: Session


class AdoptedSessions:
    """The Session each adoption of this replica was made for, by its pod's uid, until
    the pod's poll is answered."""

    def __init__(self, most: int = KEPT_SESSIONS) -> None:
        self._most = most
        self._kept: OrderedDict[str, Adopter] = OrderedDict()

    def keep(self, pod_uid: str, adopter: Adopter) -> None:
        self._kept[pod_uid] = adopter
        while len(self._kept) > self._most:
            self._kept.popitem(last=False)

    def take(self, pod_uid: str) -> Adopter | None:
        return self._kept.pop(pod_uid, None)


def _nobody() -> None:
    return None


class AskingPods:
    """The pooled pods whose runner has asked this replica to be adopted, by uid: its
    actor is imported and it long-polls, so an adoption is answered at once. A pod
    Running is not that yet (its Python may still be importing for seconds on a
    loaded node): the pools offer only these (``WarmPools``)."""

    def __init__(self) -> None:
        self._uids: set[str] = set()
        self.first_asked: Callable[[], None] = _nobody
        """Told when a pod asks for the first time (the pools' wake)."""

    def asked(self, pod_uid: str) -> None:
        if pod_uid not in self._uids:
            self._uids.add(pod_uid)
            self.first_asked()

    def __contains__(self, pod_uid: str) -> bool:
        return pod_uid in self._uids

    def forget(self, pod_uid: str) -> None:
        self._uids.discard(pod_uid)


class AdoptionAnswers:
    def __init__(
        self,
        verifier: RunnerPodVerifier,
        control: AdoptionReads,
        kube: Kube,
        adopted: AdoptedSessions | None = None,
        asking: AskingPods | None = None,
    ) -> None:
        self._verifier = verifier
        self._control = control
        self._kube = kube
        self._adopted = adopted or AdoptedSessions()
        self._asking = asking or AskingPods()

    async def answer(self, token: str, timeout: float) -> AdoptionReply:  # noqa: ASYNC109
        pod = await self._verifier.pod(token)
        if pod.service_account != RUNNER_SERVICE_ACCOUNT:
            raise Forbidden(f"pod {pod.name} is not a runner pod")
        self._asking.asked(pod.uid)
        adoption = await self._control.adoption(pod.uid, timeout)
        if adoption is None:
            raise ReceiveTimeout(f"no Session adopted pod {pod.name} within {timeout:g}s")
        if adoption.namespace != pod.namespace:
            raise Forbidden(f"pod {pod.name} was adopted in another namespace")
        session, owner = await self._adopter(pod.uid, adoption.session_id)
        try:
            env = (
                {}
                if owner is None
                else await settings_values(
                    self._kube,
                    session.namespace,
                    SessionEnv.of(owner.spec.env, owner.spec.env_from),
                )
            )
        except SettingsUnavailable as exc:  # deleted since the adoption checked it
            raise Conflict(f"session {session.id}: {exc}") from exc
        limits = session.limits
        idle = None if limits is None else limits.idle_timeout_seconds
        return AdoptionReply(
            session_id=adoption.session_id,
            namespace=adoption.namespace,
            epoch=adoption.epoch,
            idle_timeout=None if idle is None else float(idle),
            env=env,
        )

    async def _adopter(self, pod_uid: str, session_id: str) -> tuple[SessionView, Session | None]:
        """The Session that adopted the pod, and its resource: as this replica's adopter
        held them, else read (another replica adopted it, or this one restarted)."""
        adopter = self._adopted.take(pod_uid)
        if adopter is not None and adopter.view.id == session_id:
            return adopter.view, adopter.resource
        session = await self._control.get_session(session_id)
        return session, await self._kube.get_resource(Session, session.namespace, session.name)
