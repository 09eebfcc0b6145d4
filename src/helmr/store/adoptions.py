"""Runner pods adopted from a warm pool: which Session's process each pod runs.

A pod is adopted once (its uid is the key), a Session's process epoch by one pod;
the row outlives the pod, so a pod's token can never be taken for another Session.
"""

from __future__ import annotations

import sqlite3

from helmr.store.codec import dump_time
from helmr.store.rows import AdoptionRow
from helmr.store.tx import ReadTx, Tx


def insert(tx: Tx, adoption: AdoptionRow) -> None:
    """Records the adoption (an IntegrityError if the pod, or the Session's epoch,
    was adopted already: the transaction then commits nothing)."""
    tx.conn.execute(
        "INSERT INTO adoptions (pod_uid, namespace, pod_name, claim, session_id, epoch,"
        " adopted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            adoption.pod_uid,
            adoption.namespace,
            adoption.pod_name,
            adoption.claim,
            adoption.session_id,
            adoption.epoch,
            dump_time(tx.now),
        ),
    )


def set_first_claim(tx: Tx, namespace: str, workspace: str, claim: str) -> None:
    """The Workspace's first disk is ``claim`` (a new Workspace: its row is made here)."""
    tx.conn.execute(
        "INSERT INTO workspaces (namespace, name, first_claim) VALUES (?, ?, ?)",
        (namespace, workspace, claim),
    )


def of_pod(rt: ReadTx, pod_uid: str) -> AdoptionRow | None:
    row = rt.conn.execute("SELECT * FROM adoptions WHERE pod_uid = ?", (pod_uid,)).fetchone()
    return None if row is None else _adoption(row)


def of_process(rt: ReadTx, session_id: str, epoch: int) -> AdoptionRow | None:
    row = rt.conn.execute(
        "SELECT * FROM adoptions WHERE session_id = ? AND epoch = ?", (session_id, epoch)
    ).fetchone()
    return None if row is None else _adoption(row)


def of_pods(rt: ReadTx, pod_uids: list[str]) -> list[AdoptionRow]:
    """The adoptions of those of ``pod_uids`` that were adopted."""
    if not pod_uids:
        return []
    marks = ", ".join("?" for _ in pod_uids)
    rows = rt.conn.execute(f"SELECT * FROM adoptions WHERE pod_uid IN ({marks})", pod_uids)
    return [_adoption(row) for row in rows.fetchall()]


def _adoption(row: sqlite3.Row) -> AdoptionRow:
    return AdoptionRow(
        pod_uid=row["pod_uid"],
        namespace=row["namespace"],
        pod_name=row["pod_name"],
        claim=row["claim"],
        session_id=row["session_id"],
        epoch=row["epoch"],
    )
