"""The threads the control plane's Kubernetes calls run on, each with a connection.

The official Kubernetes client is synchronous: a call holds a thread for its round
trip to the apiserver. On the event loop's default executor (``asyncio.to_thread``,
a few threads per core) the status mirror's patches, the supervisor's pod starts and
the runners' TokenReviews queued behind each other, every thread waiting for the
apiserver while the process stayed mostly idle (docs/sizing.md). Here they have
threads of their own, as many as the client's connection pool keeps connections
(:func:`api_configuration`), so no call waits for a connection either.

The runners' TokenReviews have a lane of their own (:data:`RUNNER_REVIEWS`): after
a restart every runner reconnects at once, and their reviews queued on the shared
threads would hold up the public API's reviews and the operator's own calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from helmr.kube.errors import translating

if TYPE_CHECKING:
    from kubernetes import client

P = ParamSpec("P")
T = TypeVar("T")


class Lane:
    """Threads of their own for some Kubernetes calls (started on first use):
    beyond ``threads`` calls under way, calls wait their turn in the lane."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self._name = name
        self._executor: ThreadPoolExecutor | None = None

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on one of the lane's threads: ``asyncio.to_thread``
        (context variables included) on these threads instead of the loop's default ones.
        The client's errors come out as :class:`helmr.kube.errors.KubeError`."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self._name)
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(context.run, translating(fn), *args, **kwargs)
        )


THREADS = 16
"""The operator's and the public API's Kubernetes calls under way at once."""
RUNNER_REVIEW_THREADS = 8
"""Runner tokens' TokenReviews under way at once (each runner's first call)."""
LEASE_CONNECTIONS = 1
"""The leader Lease's renewals (helmr.operator.leadership.lease), which stay on the loop's
default executor so that they never wait behind these calls."""

CALLS = Lane(THREADS, "helmr-kube")
RUNNER_REVIEWS = Lane(RUNNER_REVIEW_THREADS, "helmr-runner-review")


def api_configuration() -> client.Configuration:
    """The client's configuration as loaded (kubeconfig or in-cluster), with a
    connection per thread kept in its pool (its default: 5 per CPU of the node)."""
    from kubernetes import client

    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = THREADS + RUNNER_REVIEW_THREADS + LEASE_CONNECTIONS
    return configuration


call = CALLS.call
"""A call on the shared lane: most of the control plane's Kubernetes calls."""
