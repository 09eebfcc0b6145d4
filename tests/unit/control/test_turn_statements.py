"""What a no-op Turn costs the store: the statements of its transactions.

Every Turn runs them on the single writer (or a pooled PostgreSQL connection,
a round trip each), so they bound a replica's Turns per second; a change that
reads a row back after writing it, or reads one twice, shows up here.
Counted on SQLite, whose statements are the store's own and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

from helmr.control import disks, limits, processes, sessions, turns
from helmr.control.config import ControlConfig
from helmr.control.views import load_session
from helmr.protocol.api import TurnView
from helmr.store import Tx
from helmr.store import sessions as stored_sessions
from helmr.store.dialect import SQLITE
from helmr.store.schema import connect, migrate
from tests.unit.control.harness import DEFAULT_LIMITS
from tests.unit.counting import CountingConnection

T = TypeVar("T")

TURN_BUDGET = {
    "enqueue": 5,
    "enqueue answering the Session": 5,
    "enqueue answering the Session, its limits resolved": 5,
    "receive": 6,
    "complete": 7,
    "complete, the next Turn to wait for its save's cut": 7,
    "receive with nothing queued": 2,
    "complete and take next": 15,
    "read the Session": 1,
}
"""Statements per transaction of a no-op Turn (issue 11, item 5: 42 in all before);
the receive with nothing queued is answered by the read-only look. A Session read
(the API's, kopf's resume, a runner's token check) counts its queued Turns in the
same statement; the API's enqueue answers the Session from the read its guard makes,
which counts the queue too (6 statements before, 7 with the queue limit resolved)."""


def test_a_no_op_turn_takes_at_most_its_budget_of_statements(tmp_path: Path) -> None:
    conn = connect(str(tmp_path / "helmr.db"), synchronous="NORMAL", read_only=False)
    migrate(conn)
    counted = CountingConnection(conn)
    spent: dict[str, int] = {}

    def run(name: str, fn: Callable[[Tx], T]) -> T:
        counted.statements.clear()
        conn.execute("BEGIN")
        value = fn(Tx(counted, SQLITE, datetime.now(UTC)))
        conn.execute("COMMIT")
        spent[name] = len(counted.statements)
        return value

    session = run(
        "open",
        lambda tx: sessions.open_session(tx, namespace="team", name="s", actor="a", workspace="w"),
    )
    epoch = run("start", lambda tx: processes.started(tx, ControlConfig(), session.id))
    for _ in range(2):  # the second Turn is the warm one: its Workspace row exists
        turn = run("enqueue", lambda tx: turns.enqueue(tx, session.id, "noop"))
        running = run("receive", lambda tx: turns.take_next(tx, session.id, epoch))
        assert isinstance(running, TurnView)
        assert (running.id, running.status) == (turn.id, "running")
        done = run(
            "complete", partial(turns.complete, session_id=session.id, epoch=epoch, turn_id=turn.id)
        )
        assert done.status == "completed"
        idle = run("receive with nothing queued", lambda tx: turns.look(tx, session.id, epoch))
        assert idle is None
        view = run("read the Session", lambda tx: load_session(tx, session.id))
        assert (view.id, view.queued_turns) == (session.id, 0)
    # Saves cut at Turns' ends (a disk backend that cuts them): the completion also
    # makes the next Turn wait for its save's cut, in the same update of the Session.
    run("align", partial(disks.align_saves, namespace="team", workspace="w", aligned=True))
    turn = run("enqueue", lambda tx: turns.enqueue(tx, session.id, "noop"))
    run("receive", lambda tx: turns.take_next(tx, session.id, epoch))
    cut = "complete, the next Turn to wait for its save's cut"
    run(cut, partial(turns.complete, session_id=session.id, epoch=epoch, turn_id=turn.id))
    version = run("read", lambda tx: stored_sessions.require(tx, session.id)).awaiting_cut
    assert version is not None
    saved = partial(disks.take_save, namespace="team", workspace="w", version=version)
    assert run("take", saved) is not None  # it covers the two saves before it
    run("cut", partial(disks.save_cut, namespace="team", workspace="w", version=version))
    assert run("read", lambda tx: stored_sessions.require(tx, session.id)).awaiting_cut is None
    # A busy runner's turn boundary (runner protocol 3): one transaction settles a Turn
    # and starts the next.
    first = run("enqueue", lambda tx: turns.enqueue(tx, session.id, "noop"))
    second = run("enqueue", lambda tx: turns.enqueue(tx, session.id, "noop"))
    run("receive", lambda tx: turns.take_next(tx, session.id, epoch))
    started = run(
        "complete and take next",
        partial(turns.complete_and_take_next, session_id=session.id, epoch=epoch, turn_id=first.id),
    )
    assert isinstance(started, TurnView)
    assert (started.id, started.status) == (second.id, "running")
    # The API's enqueue, which answers the Session too (for the Turn's Kubernetes object).
    answering = partial(turns.enqueue_answering_session, session_id=session.id, input="noop")
    run("enqueue answering the Session", answering)
    run("resolve", partial(limits.resolve, session_id=session.id, limits=DEFAULT_LIMITS))
    run("enqueue answering the Session, its limits resolved", answering)
    over = {name: spent[name] for name, most in TURN_BUDGET.items() if spent[name] > most}
    assert not over, f"statements over the budget {TURN_BUDGET}: {over}"
