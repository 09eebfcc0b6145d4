"""The leader's term in the store: epoch fencing for the control plane's leader.

Several replicas share one store; only the replica holding the Kubernetes
Lease may run the supervisor and the status mirror. A Lease alone cannot stop
a deposed leader that still runs (paused, partitioned, slow to notice) from
committing a write after its successor took over. So the store keeps the
term (the Lease's transition count when it was taken) and the holder of the
latest takeover, and every write of the leader's work checks them in its own
transaction: once a successor has claimed a higher term, a deposed leader's
writes are refused (:class:`Deposed`) and roll back.

The table, ``leader_term``, and its one row are the schema's
(:mod:`helmr.store.schema`, version 7): a store never led has term 0 and no
holder.

The check is an ``UPDATE`` of the one row rather than a ``SELECT``: on a
server database it takes the row's lock, so a takeover waits for the
transactions that checked the old term to end, and none of them can commit
after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from helmr.store.tx import ReadTx, Tx


class Deposed(Exception):
    """A write of a leader whose term has ended: refused, nothing of it committed."""


@dataclass(frozen=True, slots=True)
class Term:
    number: int
    holder: str


def current(rt: ReadTx) -> Term:
    """The latest claimed term (term 0, holder ``""``: never claimed). A
    candidate's term must be higher than this."""
    row = rt.conn.execute("SELECT term, holder FROM leader_term WHERE id = 1").fetchone()
    return Term(int(row[0]), str(row[1]))


def claim(tx: Tx, term: Term) -> None:
    """Records ``term`` as the store's leader; Deposed when a term as high or
    higher was claimed by another (the Lease moved on meanwhile)."""
    taken = tx.conn.execute(
        "UPDATE leader_term SET term = ?, holder = ? WHERE id = 1 AND term < ?",
        (term.number, term.holder, term.number),
    ).rowcount
    if not taken and current(tx) != term:
        raise Deposed(f"term {term.number} of {term.holder} is over: {current(tx)}")


def check(tx: Tx, term: Term) -> None:
    """Refuses the transaction (Deposed) unless ``term`` is still the store's leader."""
    held = tx.conn.execute(
        "UPDATE leader_term SET term = term WHERE id = 1 AND term = ? AND holder = ?",
        (term.number, term.holder),
    ).rowcount
    if not held:
        raise Deposed(f"term {term.number} of {term.holder} is over: {current(tx)}")
