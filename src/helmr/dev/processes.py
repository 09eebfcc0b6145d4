"""Runner processes as local subprocesses (:class:`~helmr.operator.runners.backend.RunnerBackend`):
``python -m helmr.runner`` per process epoch, with a runner pod's environment
(:func:`helmr.operator.runners.pods.runner_env`) but for where its token and its
Computer are: a token file of its own (:mod:`helmr.dev.tokens`) and the Workspace's
directory (:mod:`helmr.dev.directories`), in ``HELMR_COMPUTER_DIR``.

Each process is a process group of its own, as a pod is a sandbox of its own:
ending it (``remove``: SIGTERM, SIGKILL after the grace period a runner pod gets)
ends whatever the actor started too. Its end is reported to the supervisor as a
runner pod's is (``PodReport``): an exit of its own with its exit code; an end the
supervisor asked for as a deleted pod's; and an end by a signal nobody here sent
(``kill -9``, the OOM killer) as execution loss, as a pod deleted under its Session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helmr.dev.tokens import RunnerTokens
from helmr.operator.runners.backend import RunnerRef, RunnerState
from helmr.operator.runners.pod_reports import PodReport
from helmr.operator.runners.pods import RunnerSpec, runner_env

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 2.0
"""SIGTERM to SIGKILL, as a runner pod's ``terminationGracePeriodSeconds``."""

Report = Callable[[PodReport], Awaitable[None]]


async def _nobody_listens(report: PodReport) -> None:
    return None


@dataclass(slots=True)
class LocalRunner:
    """One runner process and what it was started with."""

    ref: RunnerRef
    process: asyncio.subprocess.Process
    code_version: int
    """The actor code it runs (:attr:`ProcessRunners.code_version` when it started)."""
    removing: bool = False
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class ProcessRunners:
    def __init__(
        self,
        tokens: RunnerTokens,
        python_path: Sequence[Path],
        *,
        log_dir: Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        """``python_path``: where the actor's code is imported from (the first is the
        working directory, as ``/app`` is a runner pod's); ``log_dir``: each process's
        output goes to a file there (None: this process's own output)."""
        self.tokens = tokens
        self.python_path = tuple(python_path)
        self.log_dir = log_dir
        # Helmr's own variables reach a runner from its contract alone, as a pod's do:
        # none leaks in from the shell that started ``helmr dev``.
        self.environ = {
            name: value
            for name, value in (os.environ if environ is None else environ).items()
            if not name.startswith("HELMR_")
        }
        self.report: Report = _nobody_listens
        """Told of each process's start and end: ``Supervisor.pod_reported``."""
        self.code_version = 0
        """Raised when the actor's files change (``helmr dev``'s reload)."""
        self._running: dict[tuple[str, str], LocalRunner] = {}
        self._watchers: set[asyncio.Task[None]] = set()

    def name(self, session_name: str, epoch: int) -> str:
        return f"{session_name}-process-{epoch}"

    async def runners(
        self, namespace: str | None, session_id: str | None = None
    ) -> list[RunnerRef]:
        return [
            runner.ref
            for runner in self.local_runners()
            if namespace in (None, runner.ref.namespace)
            and session_id in (None, runner.ref.session_id)
        ]

    def local_runners(self) -> list[LocalRunner]:
        return list(self._running.values())

    def runner_of(self, session_id: str) -> LocalRunner | None:
        """The Session's newest runner process that is still there."""
        runners = [r for r in self._running.values() if r.ref.session_id == session_id]
        return max(runners, key=lambda r: r.ref.epoch, default=None)

    async def state(self, namespace: str, name: str) -> RunnerState:
        gone = (namespace, name) not in self._running
        return RunnerState(gone=gone, started=not gone, pending="")

    async def start(self, spec: RunnerSpec) -> str:
        name = self.name(spec.session_name, spec.epoch)
        token_file = self.tokens.mint(spec.session_id, spec.epoch)
        env = self.environ | {
            e["name"]: e["value"]
            for e in runner_env(spec, token_file=str(token_file), computer_dir=spec.claim_name)
        }
        paths = [str(p) for p in self.python_path]
        env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONUNBUFFERED"] = "1"
        output = self._output(name)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "helmr.runner",
                env=env,
                cwd=paths[0] if paths else None,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
        finally:
            if output is not None:
                os.close(output)
        ref = RunnerRef(spec.namespace, name, spec.session_id, spec.epoch, deleting=False)
        runner = LocalRunner(ref, process, self.code_version)
        self._running[(spec.namespace, name)] = runner
        self._watch(runner)
        log.info(
            "session %s: runner process %d started (pid %d)", ref.session_id, ref.epoch, process.pid
        )
        return f"{name}-{process.pid}"

    def _output(self, name: str) -> int | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return os.open(self.log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def remove(self, namespace: str, name: str) -> None:
        runner = self._running.get((namespace, name))
        if runner is None or runner.removing:
            return
        runner.removing = True
        ref = runner.ref
        runner.ref = RunnerRef(ref.namespace, ref.name, ref.session_id, ref.epoch, deleting=True)
        _signal(runner, signal.SIGTERM)
        self._spawn(self._kill_after_grace(runner))

    def kill(self, session_id: str) -> bool:
        """Kills the Session's runner process at once (SIGKILL to its group), as a
        node lost or an eviction ends a pod: execution loss. False if it has none."""
        runner = self.runner_of(session_id)
        if runner is None:
            return False
        _signal(runner, signal.SIGKILL)
        return True

    async def close(self) -> None:
        """Ends every runner process (``helmr dev`` stopping), without reporting:
        the next start finds their Sessions' processes gone (execution loss)."""
        self.report = _nobody_listens
        for runner in self.local_runners():
            _signal(runner, signal.SIGKILL)
        for runner in self.local_runners():
            with contextlib.suppress(ProcessLookupError):
                await runner.process.wait()
        for task in list(self._watchers):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _kill_after_grace(self, runner: LocalRunner) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(runner.ended.wait(), STOP_GRACE_SECONDS)
            return
        _signal(runner, signal.SIGKILL)

    def _watch(self, runner: LocalRunner) -> None:
        self._spawn(self._follow(runner))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            await work

        task = asyncio.create_task(run())
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _follow(self, runner: LocalRunner) -> None:
        """Reports the process started (its preparation is over: nothing to pull or
        schedule), then how it ended."""
        ref = runner.ref
        await self._reported(PodReport.of(ref, deleted=False, started=True, outcome="running"))
        code = await runner.process.wait()
        # Whatever the actor left behind in its group goes with it, as with a pod.
        _signal(runner, signal.SIGKILL)
        runner.ended.set()
        del self._running[(ref.namespace, ref.name)]
        self.tokens.revoke(ref.session_id, ref.epoch)
        if runner.removing or code < 0:
            # Asked to end (a stop Control asked for is recognised as that stop), or
            # killed by a signal nobody here sent: a pod deleted, execution lost.
            report = PodReport.of(ref, deleted=True, started=True, outcome="lost")
        else:
            report = PodReport.of(
                ref, deleted=False, started=True, outcome="exited", exit_code=code
            )
        log.info("session %s: runner process %d ended (%s)", ref.session_id, ref.epoch, code)
        await self._reported(report)

    async def _reported(self, report: PodReport) -> None:
        try:
            await self.report(report)
        except Exception:
            log.exception("session %s: its runner's report failed", report.session_id)


def _signal(runner: LocalRunner, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(runner.process.pid, signum)
