"""The runner's measurement of its Computer disk (``helmr.runner.disk_usage``): what
counts as used, when it is reported, and the environment it is configured by."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from helmr.errors import StaleEpoch, Unavailable
from helmr.protocol import contract
from helmr.runner import disk_usage
from helmr.runner.disk_usage import DiskUsage, allocated_bytes, report_disk_usage, used_bytes

MIB = 1 << 20


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        file.write(os.urandom(size))
        file.flush()
        os.fsync(file.fileno())


def test_the_walk_counts_the_blocks_of_every_file_below_the_mount(tmp_path: Path) -> None:
    empty = allocated_bytes(str(tmp_path))
    _write(tmp_path / "a.bin", 3 * MIB)
    _write(tmp_path / "deep" / "er" / "b.bin", 2 * MIB)
    os.link(tmp_path / "a.bin", tmp_path / "deep" / "a-again.bin")  # counted once
    (tmp_path / "link").symlink_to("/usr")  # not followed

    used = allocated_bytes(str(tmp_path))

    # The files' data, plus at most a little for the directories' own blocks.
    assert 5 * MIB <= used - empty <= 5 * MIB + 64 * 1024
    (tmp_path / "a.bin").unlink()
    (tmp_path / "deep" / "a-again.bin").unlink()
    assert 2 * MIB <= allocated_bytes(str(tmp_path)) - empty < 3 * MIB


def test_a_filesystem_much_larger_than_the_claim_is_measured_by_walking(tmp_path: Path) -> None:
    # tmp_path's filesystem is the machine's, far larger than a 4 MiB claim:
    # as with a hostpath CSI volume, statvfs would report the host's disk.
    _write(tmp_path / "a.bin", MIB)
    assert used_bytes(str(tmp_path), 4 * MIB) == allocated_bytes(str(tmp_path))


def test_the_disks_own_filesystem_is_measured_by_statvfs(tmp_path: Path) -> None:
    fs = os.statvfs(tmp_path)
    size = fs.f_blocks * fs.f_frsize
    before = (fs.f_blocks - fs.f_bavail) * fs.f_frsize
    used = used_bytes(str(tmp_path), size)  # the claim is the whole filesystem
    fs = os.statvfs(tmp_path)
    after = (fs.f_blocks - fs.f_bavail) * fs.f_frsize
    # Blocks reserved for root count as used: the non-root runner cannot use them.
    slack = 64 * MIB  # others write to this filesystem meanwhile
    assert min(before, after) - slack <= used <= max(before, after) + slack
    assert used > allocated_bytes(str(tmp_path))


def test_the_environment_configures_the_measurement() -> None:
    assert DiskUsage.from_environ({}) is None
    disk = DiskUsage.from_environ(
        {
            contract.ENV_COMPUTER_DIR: "/computer",
            contract.ENV_COMPUTER_CAPACITY: str(20 * MIB),
            contract.ENV_COMPUTER_LEVELS: "0.9,0.85,0.98",
            contract.ENV_COMPUTER_INTERVAL: "1",
        }
    )
    assert disk == DiskUsage("/computer", 20 * MIB, (0.85, 0.9, 0.98), 1.0)
    assert DiskUsage.from_environ({contract.ENV_COMPUTER_CAPACITY: "100"}) == DiskUsage(
        contract.COMPUTER_DIR, 100
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (contract.ENV_COMPUTER_CAPACITY, "20Mi"),
        (contract.ENV_COMPUTER_CAPACITY, "0"),
        (contract.ENV_COMPUTER_LEVELS, "0.9,lots"),
        (contract.ENV_COMPUTER_LEVELS, "0.9,1.5"),
        (contract.ENV_COMPUTER_INTERVAL, "0"),
        (contract.ENV_COMPUTER_INTERVAL, "soon"),
    ],
)
def test_a_wrong_variable_is_named(name: str, value: str) -> None:
    environ = {contract.ENV_COMPUTER_CAPACITY: "100", name: value}
    with pytest.raises(ValueError, match=name):
        DiskUsage.from_environ(environ)


def test_a_level_counts_from_its_value_on() -> None:
    disk = DiskUsage("/computer", 100, (0.85, 0.9, 0.98))
    assert [disk.band(used) for used in (0, 84, 85, 89, 90, 97, 98, 100)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
        3,
    ]


class RecordingTransport:
    """Takes the reports; fails the ones the test asks to fail."""

    session_id = "ses_1"

    def __init__(self) -> None:
        self.reports: list[int] = []
        self.failures: list[Exception] = []

    async def call(
        self, path: str, body: Any = None, *, wait: float = 0.0, heard: Any = None
    ) -> Any:
        assert path == f"/runner/v1/sessions/{self.session_id}/storage"
        if self.failures:
            raise self.failures.pop(0)
        assert body is not None
        self.reports.append(body.used_bytes)
        return {"ok": True}


@pytest.fixture
def usage(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The usage each measurement finds, in turn (the last one repeats)."""
    found: list[int] = []

    def measure(path: str, capacity: int) -> int:
        return found.pop(0) if len(found) > 1 else found[0]

    monkeypatch.setattr(disk_usage, "used_bytes", measure)
    return found


async def _reporting(transport: RecordingTransport, usage: list[int]) -> None:
    """Reports until every measurement but the last (which repeats) was taken."""
    disk = DiskUsage("/computer", 100, (0.85, 0.9, 0.98), interval=0.01)
    task = asyncio.create_task(report_disk_usage(disk, transport.session_id, transport.call))
    async with asyncio.timeout(5):
        while len(usage) > 1:  # noqa: ASYNC110 (the measurements are taken in a thread)
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_usage_is_reported_first_and_then_only_when_it_crosses_a_level(
    usage: list[int],
) -> None:
    usage += [10, 11, 12, 50, 86, 87, 91, 95, 99, 99, 40, 41]
    transport = RecordingTransport()
    await _reporting(transport, usage)
    assert transport.reports == [10, 86, 91, 99, 40]


async def test_a_report_that_failed_is_sent_again_at_the_next_measurement(
    usage: list[int],
) -> None:
    usage += [91, 92, 93]
    transport = RecordingTransport()
    transport.failures.append(Unavailable("restarting"))
    await _reporting(transport, usage)
    assert transport.reports == [92]


async def test_a_fenced_process_stops_reporting(usage: list[int]) -> None:
    usage += [91]
    transport = RecordingTransport()
    transport.failures.append(StaleEpoch("fenced"))
    disk = DiskUsage("/computer", 100, (0.9,), interval=0.01)
    await asyncio.wait_for(report_disk_usage(disk, transport.session_id, transport.call), 1)
    assert transport.reports == []
