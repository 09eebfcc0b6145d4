"""Runner pods' watch events read into reports and applied a few pods at a time:
one pod's reports in order, no more pods at once than the bound, a failing report
stalls none, and nothing of the pod is kept but the report."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest

from helmr.kube.labels import LABEL_EPOCH, LABEL_SESSION_ID
from helmr.operator.runners.pod_reports import PodReport, PodReports


def pod(name: str, phase: str = "Running", state: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {LABEL_SESSION_ID: f"ses-{name}", LABEL_EPOCH: "3"},
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"containers": [{"name": "runner", "image": "runner:dev"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"state": state if state is not None else {"running": {}}}],
        },
    }


def report(name: str, event: str = "MODIFIED") -> PodReport:
    return PodReport.read(event, "team", pod(name))


def test_a_running_pod_reads_as_prepared_and_running() -> None:
    read = PodReport.read("MODIFIED", "team", pod("p"))
    assert (read.session_id, read.epoch, read.name, read.namespace) == ("ses-p", 3, "p", "team")
    assert (read.started, read.failure, read.outcome) == (True, None, "running")
    assert not read.deleted


def test_an_exited_pod_reads_its_exit_code_and_a_deleted_one_as_deleted() -> None:
    ended = pod("p", "Failed", {"terminated": {"exitCode": 3}})
    assert PodReport.read("MODIFIED", "team", ended).outcome == "exited"
    assert PodReport.read("MODIFIED", "team", ended).exit_code == 3
    assert PodReport.read("DELETED", "team", ended).deleted


def test_a_pod_that_cannot_pull_its_image_reads_as_a_failed_preparation() -> None:
    waiting = pod("p", "Pending", {"waiting": {"reason": "ErrImagePull", "message": "no such"}})
    read = PodReport.read("MODIFIED", "team", waiting)
    assert read.failure == "ErrImagePull: image runner:dev: no such"
    assert not read.started


class Recorder:
    """Applies reports by holding each until released, recording what ran when."""

    def __init__(self) -> None:
        self.started: list[PodReport] = []
        self.running = 0
        self.most_running = 0
        self.release = asyncio.Event()
        self.fail: set[str] = set()

    async def apply(self, report: PodReport) -> None:
        self.started.append(report)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await self.release.wait()
            if report.name in self.fail:
                raise RuntimeError(f"{report.name} failed")
        finally:
            self.running -= 1


async def settled(reports: PodReports) -> None:
    for _ in range(200):
        if reports.pending == 0:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{reports.pending} reports never applied")


async def test_no_more_pods_at_once_than_the_bound() -> None:
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=4)
    for n in range(10):
        reports.put(report(f"p{n}"))
    await asyncio.sleep(0.01)
    assert recorder.running == 4
    recorder.release.set()
    await settled(reports)
    assert recorder.most_running == 4
    assert len(recorder.started) == 10


async def test_one_pods_reports_apply_in_order_and_never_together() -> None:
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=8)
    events = ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    for event in events:
        reports.put(report("p", event))
    await asyncio.sleep(0.01)
    assert recorder.running == 1  # the others wait behind it, though slots are free
    recorder.release.set()
    await settled(reports)
    assert [r.deleted for r in recorder.started] == [False, False, False, True]
    assert recorder.most_running == 1


async def test_a_report_put_while_its_pod_drains_is_applied_after() -> None:
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=8)
    reports.put(report("p"))
    await asyncio.sleep(0.01)
    reports.put(report("p", "DELETED"))
    recorder.release.set()
    await settled(reports)
    assert [r.deleted for r in recorder.started] == [False, True]


async def test_a_failing_report_stalls_no_other(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    recorder.fail = {"bad"}
    reports = PodReports(recorder.apply, at_once=1)
    reports.put(report("bad"))
    reports.put(report("bad", "DELETED"))
    reports.put(report("good"))
    recorder.release.set()
    await settled(reports)
    assert [(r.name, r.deleted) for r in recorder.started] == [
        ("bad", False),
        ("bad", True),
        ("good", False),
    ]
    assert "runner pod team/bad: its event failed" in caplog.text


async def test_nothing_of_the_pod_outlives_its_report() -> None:
    """The point of reports: kopf's body may go as soon as the handler returned."""
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=1)

    class Body(dict[str, Any]):
        """A dict that can be weakly referenced."""

    body = Body(pod("p"))
    gone = weakref.ref(body)
    reports.put(PodReport.read("MODIFIED", "team", body))
    del body
    gc.collect()
    assert gone() is None
    assert reports.pending == 1
    recorder.release.set()
    await settled(reports)


async def test_stop_cancels_the_reports_under_way() -> None:
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=2)
    reports.put(report("p"))
    reports.put(report("q"))
    await asyncio.sleep(0.01)
    await reports.stop()
    assert recorder.running == 0
    assert reports.pending == 0


async def test_pods_waiting_for_their_turn_hold_no_task_each() -> None:
    recorder = Recorder()
    reports = PodReports(recorder.apply, at_once=4)
    before = len(asyncio.all_tasks())
    for n in range(100):
        reports.put(report(f"p{n}"))
    await asyncio.sleep(0.01)
    assert len(asyncio.all_tasks()) - before == 4
    recorder.release.set()
    await settled(reports)
    assert len(recorder.started) == 100
