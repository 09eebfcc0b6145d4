"""The timeline store: Sessions, Turns, messages, holds and events in SQLite.

:class:`Store` is the async entry point: ``write(fn)`` runs ``fn(tx)`` in the
single writer's transaction, ``read(fn)`` runs ``fn(rt)`` on a snapshot, and
``watch(session_id)`` wakes waiters after commits. The modules ``sessions``,
``holds``, ``turns``, ``messages``, ``timeline`` and ``retention`` hold the
functions those transactions are made of; ``helmr.control`` composes them
into the state machine, one transaction per control.
"""

from helmr.store.retention import Expired
from helmr.store.rows import (
    HoldRow,
    MessageRow,
    SessionLimits,
    SessionRow,
    StorageLimits,
    TurnRow,
)
from helmr.store.store import Store, utc_now
from helmr.store.tx import ReadTx, Tx

__all__ = [
    "Expired",
    "HoldRow",
    "MessageRow",
    "ReadTx",
    "SessionLimits",
    "SessionRow",
    "StorageLimits",
    "Store",
    "TurnRow",
    "Tx",
    "utc_now",
]
