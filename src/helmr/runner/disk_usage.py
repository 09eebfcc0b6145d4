"""The Computer disk's usage, measured in the background and reported to the
control plane (``POST storage``), which pauses, stops and resolves the Session's
disk pressure episodes from it (``session.storage_pressure``).

What is used: ``statvfs`` of the mount when that filesystem is the disk's own
(its size at most :data:`OWN_FILESYSTEM_SLACK` times the claim's: blocks a
non-root writer cannot use count as used, as they are to the runner); else the
blocks allocated to the files under the mount, found by a walk. A CSI driver
that does not enforce the claim's size (the local hostpath driver) shows the
host's disk to ``statvfs``, where only the walk tells what this Workspace used.

Measured in a thread (a walk of a large tree must not stall the runner's loop),
every ``interval`` seconds; reported on the first measurement, whenever the used
fraction crosses one of the Session's levels, and every :data:`REPORT_EVERY`
seconds regardless. A report that failed is sent again at the next measurement.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from helmr.errors import HelmrError, StaleEpoch
from helmr.protocol import StorageReport, contract, routes
from helmr.runner.transport import Call

log = logging.getLogger(__name__)

OWN_FILESYSTEM_SLACK = 1.1
"""A filesystem up to this many times the claim's size is the disk's own (its
formatting makes it a little smaller or larger than the request)."""

REPORT_EVERY = 300.0
"""Seconds after which the usage is reported even though no level was crossed."""

DEFAULT_INTERVAL = 10.0
"""Seconds between measurements when the operator gives none."""

BLOCK = 512
"""The unit of ``st_blocks``."""


@dataclass(frozen=True)
class DiskUsage:
    """What to measure: the mount, the claim's size, the levels to report at."""

    path: str
    capacity_bytes: int
    levels: tuple[float, ...] = ()
    interval: float = DEFAULT_INTERVAL

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> DiskUsage | None:
        """The measurement the operator asked for, or None (no capacity given).
        ValueError names the variable that is wrong."""
        capacity = environ.get(contract.ENV_COMPUTER_CAPACITY, "").strip()
        if not capacity:
            return None
        if not capacity.isdigit() or int(capacity) == 0:
            raise ValueError(
                f"{contract.ENV_COMPUTER_CAPACITY}={capacity!r} is not a size in bytes"
            )
        levels = environ.get(contract.ENV_COMPUTER_LEVELS, "").strip()
        interval = environ.get(contract.ENV_COMPUTER_INTERVAL, "").strip() or DEFAULT_INTERVAL
        disk = cls(
            path=environ.get(contract.ENV_COMPUTER_DIR, contract.COMPUTER_DIR),
            capacity_bytes=int(capacity),
            levels=_fractions(contract.ENV_COMPUTER_LEVELS, levels) if levels else (),
            interval=_number(contract.ENV_COMPUTER_INTERVAL, interval),
        )
        if not 0 < disk.interval < math.inf:
            raise ValueError(f"{contract.ENV_COMPUTER_INTERVAL}={interval!r} is not positive")
        if not all(0 < level <= 1 for level in disk.levels):
            raise ValueError(f"{contract.ENV_COMPUTER_LEVELS}={levels!r}: fractions in (0, 1]")
        return disk

    def band(self, used_bytes: int) -> int:
        """How many levels ``used_bytes`` has reached (a level counts from its value on)."""
        return bisect.bisect_right(self.levels, used_bytes / self.capacity_bytes)


def _number(name: str, value: object) -> float:
    try:
        return float(str(value))
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number") from None


def _fractions(name: str, value: str) -> tuple[float, ...]:
    return tuple(sorted(_number(name, part) for part in value.split(",")))


def used_bytes(path: str, capacity_bytes: int) -> int:
    """The bytes used on the disk mounted at ``path`` (see the module's docstring)."""
    fs = os.statvfs(path)
    if fs.f_blocks * fs.f_frsize <= capacity_bytes * OWN_FILESYSTEM_SLACK:
        return (fs.f_blocks - fs.f_bavail) * fs.f_frsize
    return allocated_bytes(path)


def allocated_bytes(root: str) -> int:
    """The blocks allocated to everything under ``root`` (``root`` itself excluded),
    each hard-linked file once; entries that vanish during the walk are skipped."""
    total = 0
    linked: set[tuple[int, int]] = set()
    pending = [root]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    stat = entry.stat(follow_symlinks=False)
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    pending.append(entry.path)
                elif stat.st_nlink > 1:
                    if (stat.st_dev, stat.st_ino) in linked:
                        continue
                    linked.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * BLOCK
    return total


async def report_disk_usage(disk: DiskUsage, session_id: str, call: Call) -> None:
    """Measures and reports (with ``call``, the runner's transport) until cancelled,
    or until the process is fenced."""
    loop = asyncio.get_running_loop()
    reported: tuple[int, float] | None = None  # (band, when) of the last report
    while True:
        try:
            used = await asyncio.to_thread(used_bytes, disk.path, disk.capacity_bytes)
        except OSError as e:
            log.warning("cannot measure the Computer disk at %s: %s", disk.path, e)
        else:
            band = disk.band(used)
            if reported is None or reported[0] != band or loop.time() - reported[1] >= REPORT_EVERY:
                try:
                    await call(routes.storage(session_id), StorageReport(used_bytes=used))
                except StaleEpoch:
                    return
                except (HelmrError, OSError) as e:  # OSError: no reply (TimeoutError)
                    log.warning("could not report the Computer disk's usage: %r", e)
                else:
                    reported = (band, loop.time())
        await asyncio.sleep(disk.interval)
