"""Runner identity: the runner pod's own projected service-account token.

Each runner pod mounts a token the kubelet mints for it (``pods.RUNNER_AUDIENCE``,
ten minutes, rotated by the kubelet), bound to the pod: the apiserver accepts it
only while that very pod (name and uid) exists, and refuses it for its own API
because its audience is not the apiserver's. The control plane asks the
apiserver about it with a TokenReview (audience set), whose user names the
pod, and maps the pod to the session and process epoch it was created for:

- a pod this process created (``RunnerPods.created``) must be the very pod,
  by uid, of that session's epoch;
- a pod it did not see created (by another replica, or before a restart, or
  an older epoch) must carry the name the control plane gives that session's
  epoch, in the session's namespace, under the runner service account;
- or be a warm pool's pod the store says that session's epoch adopted (by uid).
  Until it is adopted, a pooled pod's token is no session's identity.

So no Secret is needed, and a token is good for one session and one epoch:
``Control`` then fences a pod whose epoch is no longer the session's (409
``stale_epoch``). TokenReview answers are cached by the reviewer until the token
expires (``KubeAuthenticator``, :data:`REVIEW_TTL`), so a runner's calls do not
each cost an apiserver round trip.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from helmr.control import SessionName
from helmr.errors import NotFound, Unauthenticated
from helmr.kube import threads as kube_threads
from helmr.operator.runners import pods
from helmr.server.auth import User
from helmr.server.kube_auth import KubeAuthenticator
from helmr.store.rows import AdoptionRow

if TYPE_CHECKING:
    from helmr.kube.client import ApiClient

POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
"""The user extra of a pod-bound service-account token, as TokenReview reports it."""
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

REVIEW_TTL = float(pods.TOKEN_SECONDS)
"""Seconds a runner token's review is trusted at most, and never past the token's
own expiry (its JWT ``exp``): a pod's token is reviewed about once for its
lifetime (the kubelet mints a new one when 80% of it has passed). With a
two-minute cache, 5,000 runners cost the apiserver 42 reviews a second for tokens
it had already vouched for; in a profile of the control plane at 5,000 Sessions on
kwok, under load, the 8 threads of reviews spent 89% of their time waiting for the
apiserver's answers (docs/sizing.md, H). What a review vouches for that can change
before the token expires is its pod's existence: a pod deleted meanwhile cannot
act on a cached review, because its process epoch is fenced (409 ``stale_epoch``)
once its loss is recorded."""


def runner_reviewer(api: ApiClient) -> KubeAuthenticator:
    """The apiserver's reviews of runner tokens: for the runners' audience, cached
    for :data:`REVIEW_TTL` and until the token expires, on threads of their own
    (``kube_threads.RUNNER_REVIEWS``)."""
    return KubeAuthenticator(
        api,
        audiences=(pods.RUNNER_AUDIENCE,),
        cache_ttl=REVIEW_TTL,
        lane=kube_threads.RUNNER_REVIEWS,
        until_expiry=True,
    )


class TokenReviewer(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The token's user (a TokenReview for the runner audience), or None."""


@dataclass(frozen=True, slots=True)
class BoundPod:
    """The runner pod a token is bound to, as the apiserver vouches for it."""

    namespace: str
    service_account: str
    name: str
    uid: str

    @classmethod
    def of(cls, user: User) -> BoundPod | None:
        """The pod of a pod-bound service-account token's user; None for any other user."""
        namespace, _, account = user.name.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        name, uid = user.extra.get(POD_NAME, ()), user.extra.get(POD_UID, ())
        if not user.name.startswith(SERVICE_ACCOUNT_PREFIX) or len(name) != 1 or len(uid) != 1:
            return None
        return cls(namespace=namespace, service_account=account, name=name[0], uid=uid[0])


@dataclass(frozen=True, slots=True)
class _Created:
    epoch: int
    uid: str


class RunnerPods:
    """The runner pods this control-plane process created: per session, the
    newest epoch's pod uid (older ones cannot act: Control fences them)."""

    def __init__(self) -> None:
        self._newest: dict[str, _Created] = {}

    def created(self, session_id: str, epoch: int, uid: str) -> None:
        known = self._newest.get(session_id)
        if known is None or known.epoch <= epoch:
            self._newest[session_id] = _Created(epoch, uid)

    def forget(self, session_id: str, epoch: int) -> None:
        """The pod of ``epoch`` is gone (and its token with it)."""
        known = self._newest.get(session_id)
        if known is not None and known.epoch == epoch:
            del self._newest[session_id]

    def uid(self, session_id: str, epoch: int) -> str | None:
        """The uid of the pod created for the session's ``epoch``, if this process made it."""
        known = self._newest.get(session_id)
        return known.uid if known is not None and known.epoch == epoch else None


class RunnerPodVerifier:
    """``RunnerTokenVerifier`` of runner pods' projected service-account tokens."""

    def __init__(
        self,
        reviewer: TokenReviewer,
        runner_pods: RunnerPods,
        names: Callable[[str], Awaitable[SessionName]],
        adoption_of: Callable[[str], Awaitable[AdoptionRow | None]] | None = None,
    ) -> None:
        """``names``: where each Session is (``helmr.server.SessionNames``);
        ``adoption_of``: the adoption of a pooled pod, by uid (None: no warm pools)."""
        self._reviewer = reviewer
        self._runner_pods = runner_pods
        self._names = names
        self._adoption_of = adoption_of

    async def pod(self, token: str) -> BoundPod:
        """The runner pod ``token`` is bound to (Unauthenticated if none is)."""
        user = await self._reviewer.authenticate(token)
        pod = None if user is None else BoundPod.of(user)
        if pod is None:
            raise Unauthenticated(
                "not a runner pod's token (unknown or expired, or its pod is gone)"
            )
        return pod

    async def verify(self, session_id: str, epoch: int, token: str) -> bool:
        pod = await self.pod(token)
        created = self._runner_pods.uid(session_id, epoch)
        if created is not None:
            return pod.uid == created
        if await self._adopted(pod, session_id, epoch):
            return True
        try:
            session = await self._names(session_id)
        except NotFound:
            return False
        if pod != BoundPod(
            namespace=session.namespace,
            service_account=pods.RUNNER_SERVICE_ACCOUNT,
            name=pods.pod_name(session.name, epoch),
            uid=pod.uid,
        ):
            return False
        # Its pod is the one the session's epoch runs in: trust it by uid from now on.
        self._runner_pods.created(session_id, epoch, pod.uid)
        return True

    async def _adopted(self, pod: BoundPod, session_id: str, epoch: int) -> bool:
        """Whether ``pod`` is a pooled pod the Session's process ``epoch`` adopted (then
        trusted by uid from now on)."""
        if self._adoption_of is None:
            return False
        adoption = await self._adoption_of(pod.uid)
        if adoption is None or (adoption.session_id, adoption.epoch) != (session_id, epoch):
            return False
        if adoption.namespace != pod.namespace:
            return False
        self._runner_pods.created(session_id, epoch, pod.uid)
        return True
