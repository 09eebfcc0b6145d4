"""The cyclic garbage collector, set for a process that holds thousands of Sessions.

CPython's collector stops the process to scan every tracked object of the
generations it collects. With its defaults (the youngest generation collected
every 700 allocations net; the oldest, the whole heap, after ten collections of
the middle one once the oldest has grown by a quarter), a control plane serving
5,000 Sessions under load collected its whole heap every few seconds, each pause
up to 600 ms with every request waiting behind it (docs/sizing.md, "The cyclic
garbage collector's pauses"). Two settings, made once the process has started:

- What the process made to start (its modules and classes, the schemas, the
  Sessions' names) lives as long as the process does: :func:`gc.freeze` moves it
  out of every later collection. Only cyclic garbage among it would never be
  freed, so the process collects once just before.
- The youngest generation is collected every :data:`YOUNG_THRESHOLD`
  allocations. A request's short-lived objects in cycles (its futures and tasks,
  an exception and its traceback) then die before a collection moves them on to
  an older generation, and the oldest generation, whose growth sets off a
  collection of the whole heap, grows by what lives on.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Allocations net between collections of the youngest generation (CPython: 700).
What that generation leaves unfreed meanwhile is bounded by it: some MiB at most.
Cyclic garbage that lived long enough to reach the oldest generation (a restart's
storm makes much of it) waits for a full collection, which this makes rarer; measured
at 5,000 Sessions, the process's memory was no higher for it (docs/sizing.md, "5,000
Sessions again")."""


def settle_after_start() -> None:
    """Freezes what the process has made so far, and sets the young threshold."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
