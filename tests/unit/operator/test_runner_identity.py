"""Runner identity: a pod-bound token is good for its own session and epoch only.

The TokenReview is stubbed at the verifier's own seam (``TokenReviewer``: what
the apiserver would say of a token); sessions are a real store's, and the
runner API is the real app, so the epoch the verifier checks is the header's.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from helmr.control.adoptions import PooledPod
from helmr.errors import Unauthenticated
from helmr.kube import threads as kube_threads
from helmr.operator.runners import pods
from helmr.operator.runners.adoption_answers import AdoptedSessions, Adopter, AdoptionAnswers
from helmr.operator.runners.identity import (
    POD_NAME,
    POD_UID,
    REVIEW_TTL,
    RunnerPods,
    RunnerPodVerifier,
    runner_reviewer,
)
from helmr.protocol import EPOCH_HEADER, routes
from helmr.protocol.api import SessionView
from helmr.resources import Session
from helmr.resources.session_env import SessionEnvVar
from helmr.server import SessionNames, kube_auth
from helmr.server.auth import User
from helmr.store.rows import AdoptionRow
from tests.compose import static_app
from tests.unit.control.harness import Harness
from tests.unit.control.pooled import DISK
from tests.unit.operator.stub_kube import StubKube, any_resource
from tests.unit.review_apiserver import jwt, serving_reviews


class Reviews:
    """What the apiserver says of each token it knows (a TokenReview's user)."""

    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.asked: list[str] = []

    def bind(
        self,
        token: str,
        pod: str,
        uid: str,
        *,
        namespace: str = "team",
        account: str = pods.RUNNER_SERVICE_ACCOUNT,
    ) -> None:
        self.users[token] = User(
            name=f"system:serviceaccount:{namespace}:{account}",
            uid="sa-uid",
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
            extra={POD_NAME: (pod,), POD_UID: (uid,)},
        )

    async def authenticate(self, token: str) -> User | None:
        self.asked.append(token)
        return self.users.get(token)


@pytest.fixture
def reviews() -> Reviews:
    return Reviews()


def verifier(h: Harness, reviews: Reviews, runner_pods: RunnerPods) -> RunnerPodVerifier:
    return RunnerPodVerifier(reviews, runner_pods, SessionNames(h.control))


def pod_of(session: SessionView, epoch: int) -> str:
    return pods.pod_name(session.name, epoch)


async def test_the_pod_created_for_an_epoch_is_that_epoch_of_that_session_only(
    h: Harness, reviews: Reviews
) -> None:
    a, b = await h.session(), await h.session()
    created = RunnerPods()
    created.created(a.id, 1, "uid-a1")
    created.created(b.id, 1, "uid-b1")
    reviews.bind("a1", pod_of(a, 1), "uid-a1")
    check = verifier(h, reviews, created)

    assert await check.verify(a.id, 1, "a1")
    assert not await check.verify(b.id, 1, "a1")  # another session, same epoch
    assert not await check.verify(a.id, 2, "a1")  # another epoch of its own session
    assert not await check.verify("ses_unknown", 1, "a1")


async def test_a_pod_of_the_right_name_but_not_the_one_created_is_refused(
    h: Harness, reviews: Reviews
) -> None:
    """A pod recreated under the runner's name (say by someone who may create pods
    in the namespace) is not the pod the control plane made for that epoch."""
    a = await h.session()
    created = RunnerPods()
    created.created(a.id, 1, "uid-a1")
    reviews.bind("impostor", pod_of(a, 1), "uid-other")

    assert not await verifier(h, reviews, created).verify(a.id, 1, "impostor")


async def test_tokens_the_apiserver_does_not_vouch_for_a_pod_are_unauthenticated(
    h: Harness, reviews: Reviews
) -> None:
    a = await h.session()
    reviews.users["user"] = User(name="alice", groups=("system:authenticated",))
    reviews.users["sa-without-pod"] = User(name=f"system:serviceaccount:team:{a.name}")
    check = verifier(h, reviews, RunnerPods())

    for token in ("unknown", "user", "sa-without-pod"):
        with pytest.raises(Unauthenticated):
            await check.verify(a.id, 1, token)


async def test_after_a_restart_the_pod_is_known_by_its_name_namespace_and_account(
    h: Harness, reviews: Reviews
) -> None:
    """A control plane that did not create the pod (it restarted since) checks
    what the apiserver vouches for: the session's pod name for that epoch, in the
    session's namespace, under the runner service account; then it holds that uid."""
    a, b = await h.session(), await h.session()
    reviews.bind("a2", pod_of(a, 2), "uid-a2")
    reviews.bind("elsewhere", pod_of(a, 2), "uid-x", namespace="other-team")
    reviews.bind("other-account", pod_of(a, 2), "uid-y", account="default")
    reviews.bind("b-pod", pod_of(b, 2), "uid-b2")
    runner_pods = RunnerPods()
    check = verifier(h, reviews, runner_pods)

    assert not await check.verify(a.id, 2, "elsewhere")
    assert not await check.verify(a.id, 2, "other-account")
    assert not await check.verify(a.id, 2, "b-pod")
    assert not await check.verify(a.id, 3, "a2")
    assert await check.verify(a.id, 2, "a2")
    assert runner_pods.uid(a.id, 2) == "uid-a2"


async def test_after_a_restart_with_the_names_loaded_a_token_check_reads_no_session(
    h: Harness, reviews: Reviews
) -> None:
    """5,000 runners reconnect at once after a restart: their checks are answered
    from the names the control plane loaded in one read before it listened."""
    a = await h.session()
    reviews.bind("a2", pod_of(a, 2), "uid-a2")
    reviews.bind("elsewhere", pod_of(a, 2), "uid-x", namespace="other-team")
    names = SessionNames(h.control)
    await names.load()
    transactions: Counter[str] = Counter()
    h.store.observe = lambda kind, lane, seconds: transactions.update((kind,))
    check = RunnerPodVerifier(reviews, RunnerPods(), names)

    assert not await check.verify(a.id, 2, "elsewhere")
    assert await check.verify(a.id, 2, "a2")
    assert transactions == {}


async def test_a_forgotten_pod_is_checked_by_name_again_and_older_epochs_never_replace_newer(
    h: Harness, reviews: Reviews
) -> None:
    a = await h.session()
    runner_pods = RunnerPods()
    runner_pods.created(a.id, 2, "uid-a2")
    runner_pods.created(a.id, 1, "uid-a1")  # late news of an older pod
    assert runner_pods.uid(a.id, 2) == "uid-a2"
    assert runner_pods.uid(a.id, 1) is None
    runner_pods.forget(a.id, 1)  # not the newest: nothing to forget
    assert runner_pods.uid(a.id, 2) == "uid-a2"
    runner_pods.forget(a.id, 2)
    assert runner_pods.uid(a.id, 2) is None


async def test_the_runner_api_checks_the_token_against_the_calls_epoch_header(
    h: Harness, reviews: Reviews
) -> None:
    """Through the real app: 401 for a token that is no runner's, 403 for a runner
    of another epoch, and the call's own epoch header decides which."""
    a = await h.session()
    epoch = await h.control.process_started(a.id)
    created = RunnerPods()
    created.created(a.id, epoch, "uid-live")
    reviews.bind("live", pod_of(a, epoch), "uid-live")
    await h.control.enqueue(a.id, "go")
    app = static_app(h.control, {}, verifier(h, reviews, created))

    async def receive(client: TestClient[Any, Any], token: str, claimed: int) -> int:
        async with client.post(
            routes.receive(a.id),
            json={"timeout": 1},
            headers={"Authorization": f"Bearer {token}", EPOCH_HEADER: str(claimed)},
        ) as reply:
            return reply.status

    async with TestClient(TestServer(app)) as client:
        assert await receive(client, "unknown", epoch) == 401
        assert await receive(client, "live", epoch + 1) == 403
        assert await receive(client, "live", epoch) == 200


async def test_the_runner_reviewer_asks_for_the_runner_audience_once_per_token_on_its_own_lane(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runner's calls with one token are answered from the cache until the token
    expires (its lifetime is ``REVIEW_TTL``): each pod's token is reviewed once, and
    a review never waits behind the shared lane's calls (after a restart every
    runner's first call is reviewed)."""
    now = [1000.0]
    clock = SimpleNamespace(monotonic=lambda: now[0], time=lambda: 1_700_000_000 + now[0])
    monkeypatch.setattr(kube_auth, "time", clock)
    # As the kubelet mints it: valid for TOKEN_SECONDS from now.
    token = jwt({"exp": clock.time() + pods.TOKEN_SECONDS, "aud": [pods.RUNNER_AUDIENCE]})
    assert pods.TOKEN_SECONDS == REVIEW_TTL
    release = threading.Event()
    # Every thread of the shared lane busy: a review there would wait until released.
    blocked = asyncio.gather(
        *(kube_threads.call(release.wait) for _ in range(kube_threads.THREADS))
    )
    try:
        async with serving_reviews() as (apiserver, api):
            apiserver.good_tokens.add(token)
            reviewer = runner_reviewer(api)
            # Renewals of an idle receive; past its expiry (600 s) the token is reviewed
            # again (which the real apiserver would refuse).
            for elapsed in (0.0, 120.0, 121.0, 479.0, REVIEW_TTL - 1, REVIEW_TTL + 1):
                now[0] = 1000.0 + elapsed
                assert await asyncio.wait_for(reviewer.authenticate(token), 5) is not None
    finally:
        release.set()
        await blocked
    assert [r["spec"] for r in apiserver.token_reviews] == 2 * [
        {"token": token, "audiences": [pods.RUNNER_AUDIENCE]}
    ]


async def test_a_pooled_pods_token_is_no_sessions_until_adopted_then_its_adopters_only(
    h: Harness, reviews: Reviews
) -> None:
    """A warm pool's pod carries no Session's pod name: before its adoption its token
    is refused for every Session; after, it is the adopting Session's process only,
    also for a control plane that did not adopt it (another replica, a restart)."""
    a, b = await h.session(), await h.session()
    reviews.bind("pooled", "reviewer-pool-1a2b", "uid-pooled")
    reviews.bind("pooled-elsewhere", "reviewer-pool-1a2b", "uid-pooled", namespace="other")
    check = RunnerPodVerifier(
        reviews, RunnerPods(), SessionNames(h.control), adoption_of=h.control.adoption_of_pod
    )
    for session in (a, b):
        assert not await check.verify(session.id, 1, "pooled")

    pod = PooledPod(namespace="team", name="reviewer-pool-1a2b", uid="uid-pooled", claim="c")
    assert await h.control.adopt(a.id, 1, pod, DISK)

    assert not await check.verify(a.id, 1, "pooled-elsewhere")
    assert await check.verify(a.id, 1, "pooled")
    assert not await check.verify(b.id, 1, "pooled")
    assert not await check.verify(a.id, 2, "pooled")


class SessionReads(StubKube):
    """A Session resource for any name; counts the reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get_resource(self, kind: type[Any], namespace: str, name: str) -> Any:
        self.reads += 1
        return any_resource(kind, namespace, name)


class CountedSessions:
    """The answers' store reads, counting the Sessions read."""

    def __init__(self, h: Harness) -> None:
        self._control = h.control
        self.reads = 0

    async def adoption(self, pod_uid: str, timeout: float) -> AdoptionRow | None:  # noqa: ASYNC109
        return await self._control.adoption(pod_uid, timeout)

    async def get_session(self, session_id: str) -> SessionView:
        self.reads += 1
        return await self._control.get_session(session_id)


async def test_a_pooled_runner_is_answered_with_the_session_its_adopter_held(
    h: Harness, reviews: Reviews
) -> None:
    """The adopter's Session (its resource and its store view) is the answer's: no
    apiserver read and no store read of it on the runner's path; another replica's
    answer reads both."""
    reviews.bind("pooled", "reviewer-pool-1a2b", "uid-pooled")
    check = RunnerPodVerifier(
        reviews, RunnerPods(), SessionNames(h.control), adoption_of=h.control.adoption_of_pod
    )
    adopted = AdoptedSessions()
    kube = SessionReads()
    store = CountedSessions(h)
    session = await h.session()
    owner = any_resource(Session, "team", session.name)
    owner.spec.env = [SessionEnvVar(name="MODEL", value="small")]
    adopted.keep("uid-pooled", Adopter(session, owner))
    pod = PooledPod(namespace="team", name="reviewer-pool-1a2b", uid="uid-pooled", claim="c")
    assert await h.control.adopt(session.id, 1, pod, DISK)

    reply = await AdoptionAnswers(check, store, kube, adopted).answer("pooled", 1)
    assert (reply.session_id, reply.epoch, reply.env) == (session.id, 1, {"MODEL": "small"})
    assert (kube.reads, store.reads) == (0, 0)
    elsewhere = await AdoptionAnswers(check, store, kube).answer("pooled", 1)
    assert (elsewhere.session_id, elsewhere.env) == (session.id, {})
    assert (kube.reads, store.reads) == (1, 1)
