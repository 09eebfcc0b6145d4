"""The API's clients in the replica tests: what they were answered, and calls
repeated as a client that is told to retry would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from helmr.errors import Unavailable

from .release import Release

PROBE_INTERVAL = 0.2


@dataclass
class Answers:
    """The API's answers to one client, sorted: Helmr's 5xx without Retry-After
    (never allowed), its 503s with Retry-After (``retry_later``: allowed while a
    dependency is away), its 4xx, and the apiserver proxy's own failures (a
    request routed to a pod that is gone)."""

    ok: int = 0
    retry_later: list[float] = field(default_factory=list)
    helmr_5xx: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    proxy_failures: list[float] = field(default_factory=list)

    def sort(self, status: int, headers: Mapping[str, str], body: str) -> bool:
        """Counts one answer; whether it was an answer from Helmr rather than a
        failure to reach it (a 503 with Retry-After is not one)."""
        if status < 300:
            self.ok += 1
        elif from_the_apiserver(body):
            self.proxy_failures.append(time.monotonic())
            return False
        elif status < 500:
            self.refused.append(f"{status}: {body[:200]}")
        elif "Retry-After" in headers:
            self.retry_later.append(time.monotonic())
            return False
        else:
            self.helmr_5xx.append(f"{status}: {body[:200]}")
        return True

    def unreachable(self) -> None:
        self.proxy_failures.append(time.monotonic())

    def __str__(self) -> str:
        return (
            f"{self.ok} ok, {len(self.retry_later)} 503 with Retry-After, "
            f"{len(self.helmr_5xx)} 5xx without, {len(self.refused)} 4xx, "
            f"{len(self.proxy_failures)} proxy failures"
        )


@dataclass
class Probe:
    """Asks the API for the session every PROBE_INTERVAL and sorts the answers;
    ``longest_gap``: the longest run of requests Helmr did not answer."""

    release: Release
    path: str
    timeout: float = 5.0
    """Seconds a request may take: then it counts as the proxy's failure."""
    answers: Answers = field(default_factory=Answers)
    longest_gap: float = 0.0

    async def run(self) -> None:
        failing_since: float | None = None
        async with aiohttp.ClientSession(headers=self.release.headers) as http:
            while True:
                answered = await self._ask(http)
                now = time.monotonic()
                if answered:
                    failing_since = None
                else:
                    failing_since = failing_since or now
                    self.longest_gap = max(self.longest_gap, now - failing_since)
                await asyncio.sleep(PROBE_INTERVAL)

    async def _ask(self, http: aiohttp.ClientSession) -> bool:
        try:
            async with http.get(
                self.release.base_url + self.path,
                ssl=self.release.ssl,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                body = await response.text()
                return self.answers.sort(response.status, response.headers, body)
        except (aiohttp.ClientError, TimeoutError):
            self.answers.unreachable()
            return False


def from_the_apiserver(body: str) -> bool:
    # The apiserver's own errors are Status objects; Helmr's are its ErrorBody.
    return '"kind":"Status"' in body.replace(" ", "")


async def turn_status(turn: Any, status: str) -> bool:
    view = await helmr_retrying(turn.retrieve)
    return bool(view.status == status)


async def eventually_async(check: Any, timeout: float, what: str) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def helmr_retrying(call: Any, attempts: int = 20) -> Any:
    """The workload's calls: one the proxy routed to a pod that is gone, or that
    Helmr answered ``Unavailable`` (503, retry later), is repeated."""
    for attempt in range(attempts):
        try:
            return await call()
        except (aiohttp.ClientError, OSError, TimeoutError, Unavailable):
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")
