"""The cyclic garbage collector's settings the control plane makes once started
(``helmr.operator.cyclic_gc``), made in a benchmark's own control-plane process
(``_scale_plane.py``, ``bench_turn_cpu.py``'s child) at the same point: before it
serves."""

from __future__ import annotations


def settle_collector() -> None:
    """As the control plane does, where the version measured does it: an older
    ``src`` (``--before``) may not have the module, and then runs as it did."""
    try:
        from helmr.operator.cyclic_gc import settle_after_start
    except ImportError:
        return
    settle_after_start()
