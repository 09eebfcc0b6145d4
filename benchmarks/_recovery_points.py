"""The operator's own figures for its saves over a benchmark's load (issue 28), read
from its ``/metrics``: the recovery point age (``helmr_computer_recovery_point_age_seconds``:
the oldest completed Turn not saved yet, over all Sessions), sampled every
``SAMPLE_EVERY`` seconds; and, from their histograms' growth over the load, the lag
each save that became ready ended (``helmr_computer_recovery_point_lag_seconds``: how
long the oldest Turn it committed had been unsaved) and the save cut
(``helmr_computer_save_cut_seconds``). A histogram's quantile is interpolated within
its bucket, as Prometheus's ``histogram_quantile`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import urllib.request
from dataclasses import dataclass, field

from _common import Table, percentile
from prometheus_client.parser import text_string_to_metric_families

SAMPLE_EVERY = 0.5
AGE = "helmr_computer_recovery_point_age_seconds"
LAG = "helmr_computer_recovery_point_lag_seconds"
CUT = "helmr_computer_save_cut_seconds"


def _scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _buckets(text: str, name: str) -> dict[float, float]:
    """The histogram's cumulative count per upper bound."""
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == f"{name}_bucket":
                le = float(sample.labels["le"])
                out[le] = out.get(le, 0.0) + sample.value
    return out


def _gauge(text: str, name: str) -> float:
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(sample.value for sample in family.samples)
    return 0.0


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The ``q`` quantile of what the histogram observed between two reads (None: nothing)."""
    grown = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = grown[-1][1] if grown else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in grown:
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = le, count
    return lower


@dataclass
class RecoveryPoints:
    """``async with RecoveryPoints(url):`` around a load; its figures after."""

    url: str
    ages: list[float] = field(default_factory=list)
    before: str = ""
    after: str = ""
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RecoveryPoints:
        self.before = await asyncio.to_thread(_scrape, self.url)
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.after = await asyncio.to_thread(_scrape, self.url)

    async def _sample(self) -> None:
        while True:
            self.ages.append(_gauge(await asyncio.to_thread(_scrape, self.url), AGE))
            await asyncio.sleep(SAMPLE_EVERY)

    def rows(self, table: Table) -> None:
        """Rows of ``table``: ms at p50 and p99."""
        ages = [a * 1000 for a in self.ages] or [0.0]
        table.rows.append(
            (
                f"  recovery point age, sampled every {SAMPLE_EVERY} s (gauge)",
                str(len(self.ages)),
                f"{percentile(ages, 50):.0f}",
                f"{percentile(ages, 99):.0f}",
                f"max {max(ages):.0f}",
            )
        )
        for label, name in (("recovery point lag per ready save", LAG), ("save cut", CUT)):
            before, after = _buckets(self.before, name), _buckets(self.after, name)
            p50, p99 = quantile(before, after, 0.5), quantile(before, after, 0.99)
            count = after.get(math.inf, 0.0) - before.get(math.inf, 0.0)
            table.rows.append(
                (
                    f"  {label} (histogram {name.removeprefix('helmr_')})",
                    f"{count:.0f}",
                    "-" if p50 is None else f"{p50 * 1000:.0f}",
                    "-" if p99 is None else f"{p99 * 1000:.0f}",
                    "",
                )
            )
