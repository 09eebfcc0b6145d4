"""The threads the control plane's Kubernetes calls run on, each with a connection.

The official Kubernetes client is synchronous: a call holds a thread for its round
trip to the apiserver. On the event loop's default executor (``asyncio.to_thread``:
6 threads on 2 cores) the status mirror's patches, the supervisor's pod starts and
the runners' TokenReviews queued behind each other: at 1,000 Sessions on kwok all 6
threads were busy waiting for the apiserver, with 20 to 60 calls queued for 0.3 to
0.7 s (p50) while the process used a quarter of a core (docs/sizing.md). Here they
have threads of their own, as many as the client's connection pool keeps
connections (:func:`api_configuration`), so no call waits for a connection either.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from kubernetes import client

P = ParamSpec("P")
T = TypeVar("T")

THREADS = 16
"""Kubernetes calls under way at once; beyond, calls wait their turn here."""
LEASE_CONNECTIONS = 1
"""The leader Lease's renewals (helmr.operator.lease), which stay on the loop's
default executor so that they never wait behind these calls."""

_threads: ThreadPoolExecutor | None = None


def api_configuration() -> client.Configuration:
    """The client's configuration as loaded (kubeconfig or in-cluster), with a
    connection per thread kept in its pool (its default: 5 per CPU of the node)."""
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = THREADS + LEASE_CONNECTIONS
    return configuration


async def call(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on a Kubernetes call thread: ``asyncio.to_thread``
    (context variables included) on these threads instead of the loop's default ones."""
    global _threads
    if _threads is None:
        _threads = ThreadPoolExecutor(THREADS, thread_name_prefix="helmr-kube")
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _threads, functools.partial(context.run, fn, *args, **kwargs)
    )
