"""The operator's Control: runner processes, deadlines, limits, the Computer disk
and the status mirror's reads, beside the Session verbs its kopf adapters apply.

The leader's work writes through it, each write fenced by the leader's term
(:mod:`helmr.store.leadership`): a deposed leader's writes are refused whole.
"""

from __future__ import annotations

from datetime import datetime

from helmr.control import (
    adoptions,
    disks,
    limits,
    mirror_reads,
    preparation,
    processes,
    record,
    sessions,
    storage_pressure,
)
from helmr.control.config import ControlConfig
from helmr.control.public_api import SessionControls
from helmr.control.transaction import Fence, reads, writes, writes_configured
from helmr.store import Expired, Store, mirror_cursors


class OperatorControl(SessionControls):
    def __init__(
        self, store: Store, config: ControlConfig | None = None, *, fence: Fence | None
    ) -> None:
        """``fence`` runs first in each write and refuses it by raising (None: this
        replica leads alone, unfenced)."""
        super().__init__(store, config)
        self._fence = fence

    process_started = writes_configured(processes.started)
    process_prepared = writes(preparation.prepared)
    preparation_failed = writes_configured(preparation.failed)
    overdue_preparations = reads(preparation.overdue)
    process_exited = writes_configured(processes.exited)
    execution_lost = writes_configured(processes.execution_lost)
    expire_deadlines = writes(processes.expire_deadlines)
    next_deadline = reads(processes.next_deadline)
    processes_to_stop = reads(processes.to_stop)
    replace_between_turns = writes(processes.replace_between_turns)
    live_processes = reads(processes.live)
    sessions_needing_runner = reads(processes.needing_runner)
    session_needing_runner = reads(processes.needs_runner)
    fail_session = writes(sessions.fail)
    resolve_limits = writes(limits.resolve)
    sessions_without_limits = reads(limits.unresolved)
    expire_idle = writes(limits.expire_idle)
    next_idle_expiry = reads(limits.next_idle_expiry)
    record_event = writes(record.reported)

    # Warm pools ---------------------------------------------------------------------------------

    adopt = writes_configured(adoptions.adopt)
    adopted_pod = reads(adoptions.of_process)
    adoptions_of_pods = reads(adoptions.of_pods)

    # The Computer disk ------------------------------------------------------------------------

    current_disk = writes(disks.current_disk)
    saves_to_step = reads(disks.saves_to_step)
    align_saves = writes(disks.align_saves)
    take_save = writes(disks.take_save)
    save_cut = writes(disks.save_cut)
    not_cut_now = writes(disks.not_cut_now)
    save_ready = writes(disks.save_ready)
    covered_saves = reads(disks.covered_saves)
    save_failed = writes_configured(disks.save_failed)
    saves_to_prune = reads(disks.saves_to_prune)
    save_pruned = writes(disks.save_pruned)
    set_storage_limits = writes(storage_pressure.set_limits)
    sessions_under_storage_pressure = reads(storage_pressure.under_pressure)

    # The status mirror's cursors: how far it followed each timeline --------------------------

    mirrored_through = reads(mirror_cursors.load)
    save_mirrored_through = writes(mirror_cursors.save)
    read_sessions_after = reads(mirror_reads.sessions_after)
    read_turns = reads(mirror_reads.turns_of)

    async def changed_sessions(self, timeout: float) -> set[str]:  # noqa: ASYNC109
        """Sessions changed since the previous call (one consumer: the status mirror)."""
        return await self._store.changed_sessions(timeout)

    async def expire_history(self, now: datetime) -> Expired:
        """Applies the store's history retention period as of ``now``."""
        return await self._store.expire(now)
