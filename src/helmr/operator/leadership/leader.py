"""Which control-plane replica leads, and the leader's work while it does.

Every replica serves the REST and runner APIs over the shared store. One at a
time, the holder of a ``coordination.k8s.io`` Lease (:mod:`helmr.operator.leadership.lease`),
runs the leader's work: the supervisor, the status mirror, history expiry and
kopf's handlers (kopf starts watching only once this replica leads:
:func:`helmr.operator.kopf.handlers.operator_startup`).

On taking the Lease the new leader claims its term in the store
(:mod:`helmr.store.leadership`); each store write of the leader's work checks
that term in its own transaction (:attr:`Leadership.fence`), so a deposed
leader that still runs cannot commit. Deposed (another took the Lease, or it
could not be renewed in time) the leader's work is cancelled at once, which
stops its Kubernetes writes, the fence refuses everything after, and
``on_deposed`` ends the process: a fresh one stands for election again.

Without an elector (a single replica run by hand, or tests) the process
leads from the start, unfenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client import Gauge

from helmr.control.transaction import Fence
from helmr.kube.lease import KubeLease
from helmr.operator.leadership.lease import LeaderElector, LeaseTiming
from helmr.operator.settings import Settings
from helmr.store import Store, Tx
from helmr.store import leadership as terms
from helmr.store.leadership import Deposed, Term

if TYPE_CHECKING:
    from helmr.kube.client import ApiClient

log = logging.getLogger(__name__)

# How long a stopping leader tries to release the Lease for its successor.
_RELEASE_TIMEOUT = 5.0


def elector(settings: Settings, api: ApiClient) -> LeaderElector | None:
    """The candidate ``settings.leader_lease`` asks for: this process, under a name
    of its own (the pod's, and a suffix: a restarted container is a new one)."""
    if not settings.leader_lease:
        return None
    namespace, _, name = settings.leader_lease.partition("/")
    duration = settings.leader_lease_seconds
    # client-go's proportions: renew deadline 2/3 of the duration, retry 2/15.
    timing = LeaseTiming(
        duration=duration, renew_deadline=duration * 2 / 3, retry=duration * 2 / 15
    )
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    return LeaderElector(KubeLease(api, namespace, name), identity, timing)


class Leadership:
    def __init__(
        self, store: Store, elector: LeaderElector | None, *, on_deposed: Callable[[], None]
    ) -> None:
        self._store = store
        self._elector = elector
        self._on_deposed = on_deposed
        self._term: Term | None = None
        self.elected = asyncio.Event()
        """Set once this replica leads (and stays set: a deposed leader's process ends)."""
        self.gauge = Gauge(
            "helmr_leader",
            "1 while this replica leads (runs the supervisor and the status mirror), else 0.",
            registry=None,
        )

    @property
    def leading(self) -> bool:
        return self.elected.is_set() and (self._elector is None or self._term is not None)

    @property
    def term(self) -> Term | None:
        """The store term this replica leads in (None: it does not, or runs unfenced)."""
        return self._term

    @property
    def fence(self) -> Fence | None:
        """The check every store write of the leader's work makes (None: unfenced)."""
        return None if self._elector is None else self._check

    def _check(self, tx: Tx) -> None:
        term = self._term  # read once: the writer thread runs this
        if term is None:
            raise Deposed("this replica does not lead")
        terms.check(tx, term)

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Stands for election, then runs ``lead()`` while this replica leads."""
        if self._elector is None:
            self._lead_from(None)
            await lead()
            return
        term = await self._claim(self._elector)
        if term is None:
            self._on_deposed()
            return
        self._lead_from(term)
        work = asyncio.ensure_future(lead())
        deposed = False
        try:
            await self._elector.hold()
            deposed = True
        finally:
            self._term = None
            self.gauge.set(0)
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
            if not deposed:  # stopping: a successor need not wait for the Lease to expire
                await self._release()
        log.warning("leader election: deposed from term %d; this process ends", term.number)
        self._on_deposed()

    async def _claim(self, elector: LeaderElector) -> Term | None:
        """Takes the Lease, in a term above the store's, and claims that term in
        the store. None when this process cannot lead: overtaken (Deposed), or
        the store failed; it ends then, and its successor stands afresh."""
        try:
            floor = await self._store.read(terms.current)
            term = Term(await elector.acquire(floor.number), elector.identity)
            await self._store.write(partial(terms.claim, term=term))
        except Exception as exc:
            log.warning("leader election: could not claim a term: %r", exc)
            return None
        return term

    def _lead_from(self, term: Term | None) -> None:
        self._term = term
        self.gauge.set(1)
        self.elected.set()

    async def _release(self) -> None:
        assert self._elector is not None
        try:
            async with asyncio.timeout(_RELEASE_TIMEOUT):
                await self._elector.release()
        except Exception:
            log.exception("leader election: could not release the Lease; it expires instead")
