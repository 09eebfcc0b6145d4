"""The collector's settings the control plane makes once started: what exists then
is out of every later collection, its cyclic garbage freed first, and the youngest
generation is collected less often."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from helmr.operator.cyclic_gc import YOUNG_THRESHOLD, settle_after_start


class Node:
    """An object the collector tracks, which can be made part of a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def tracked(obj: object) -> bool:
    """Whether a collection of the oldest generation would scan ``obj``."""
    return any(each is obj for each in gc.get_objects())


def test_what_exists_at_the_start_is_frozen_and_what_comes_after_is_not() -> None:
    before = Node()
    assert tracked(before)

    settle_after_start()

    after = Node()
    assert not tracked(before)
    assert tracked(after)
    assert gc.get_freeze_count() > 0


def test_cyclic_garbage_is_freed_before_the_freeze() -> None:
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.disable()  # no collection of its own may free the cycle before the settling
    try:
        assert gone() is not None
        settle_after_start()
    finally:
        gc.enable()
    assert gone() is None


def test_the_youngest_generation_is_collected_less_often() -> None:
    _, middle, oldest = gc.get_threshold()

    settle_after_start()

    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, oldest)
