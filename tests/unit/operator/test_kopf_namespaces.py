"""Namespaces kopf learns of by listing are served (helmr.operator.kopf.namespaces)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kopf._cogs.structs import references
from kopf._core.reactor import observation

from helmr.operator.kopf import handlers  # noqa: F401  # importing it installs the fix
from helmr.operator.kopf.namespaces import KOPF_HANDLER, observe_namespace

PATTERNS = ["team-*"]


def listed(name: str) -> Any:
    return {"type": None, "object": {"metadata": {"name": name}}}


async def test_kopf_itself_still_ignores_listed_namespaces() -> None:
    """If this fails, kopf reads listings itself: drop helmr.operator.kopf.namespaces."""
    insights = references.Insights()
    await KOPF_HANDLER(raw_event=listed("team-a"), namespaces=PATTERNS, insights=insights)
    assert insights.namespaces == set()


async def test_the_operator_reads_listed_namespaces_and_wakes_kopfs_orchestrator() -> None:
    assert observation.process_discovered_namespace_event is observe_namespace
    insights = references.Insights()

    async def woken() -> None:
        async with insights.revised:
            await insights.revised.wait()

    waiter = asyncio.create_task(woken())
    await asyncio.sleep(0)
    await observation.process_discovered_namespace_event(
        raw_event=listed("team-a"), namespaces=PATTERNS, insights=insights
    )
    await asyncio.wait_for(waiter, timeout=5)
    assert insights.namespaces == {"team-a"}


async def test_listed_namespaces_outside_the_patterns_stay_unserved() -> None:
    insights = references.Insights()
    await observe_namespace(raw_event=listed("other"), namespaces=PATTERNS, insights=insights)
    assert insights.namespaces == set()


async def test_a_deleted_namespace_is_dropped_as_before() -> None:
    insights = references.Insights()
    await observe_namespace(raw_event=listed("team-a"), namespaces=PATTERNS, insights=insights)
    deleted = {"type": "DELETED", "object": {"metadata": {"name": "team-a"}}}
    await observe_namespace(raw_event=deleted, namespaces=PATTERNS, insights=insights)  # type: ignore[arg-type]
    assert insights.namespaces == set()


async def test_a_namespace_served_from_a_listing_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="helmr.operator.kopf.namespaces")
    await observe_namespace(
        raw_event=listed("team-a"), namespaces=PATTERNS, insights=references.Insights()
    )
    assert "serving namespace team-a (seen in a listing)" in caplog.text
