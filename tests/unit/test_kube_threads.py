"""Kubernetes calls have threads of their own (helmr.kube.threads): as many run at
once as there are threads, and none waits behind the event loop's default executor."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from helmr.kube import threads as kube_threads

_CALLER = contextvars.ContextVar("caller", default="")


async def test_as_many_calls_as_threads_run_at_once() -> None:
    # Each call returns only once all of them run: fewer threads would time out.
    all_running = threading.Barrier(kube_threads.THREADS, timeout=10)
    await asyncio.gather(
        *(kube_threads.call(all_running.wait) for _ in range(kube_threads.THREADS))
    )


async def test_a_call_does_not_wait_behind_a_busy_default_executor() -> None:
    loop = asyncio.get_running_loop()
    release = threading.Event()
    # Far more blocked jobs than the default executor has threads.
    blocked = [loop.run_in_executor(None, release.wait) for _ in range(64)]
    try:
        _CALLER.set("the mirror")
        thread, caller = await asyncio.wait_for(
            kube_threads.call(lambda: (threading.current_thread().name, _CALLER.get())), 5
        )
    finally:
        release.set()
        await asyncio.gather(*blocked)
    assert thread.startswith("helmr-kube")
    assert caller == "the mirror"  # context variables go along, as with asyncio.to_thread


def test_the_connection_pool_keeps_a_connection_per_thread() -> None:
    configuration = kube_threads.api_configuration()
    assert configuration.connection_pool_maxsize >= kube_threads.THREADS
