"""PostgreSQL's transaction control through libpq (``postgres._command``) and the
commit's ``NOTIFY`` text (``postgres_feed.commit``): the same errors as psycopg's
``execute``, and payloads as they were sent."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors
from psycopg.pq import TransactionStatus

from helmr.store.postgres import _command
from helmr.store.postgres_feed import CHANNEL, commit
from tests.postgres import PostgresServer


@pytest.fixture
def url(postgres_server: PostgresServer) -> Iterator[str]:
    with postgres_server.database(migrated=False) as url:
        yield url


def test_a_commit_notifies_each_session_id_as_sent(url: str) -> None:
    ids = ["ses_01", "it's", "back\\slash", "ünï"]
    with (
        psycopg.Connection.connect(url, autocommit=True) as listener,
        psycopg.Connection.connect(url, autocommit=True) as writer,
    ):
        listener.execute(f"LISTEN {CHANNEL}")
        _command(writer, "BEGIN")
        _command(writer, commit("origin", ids))
        [notified] = listener.notifies(timeout=5, stop_after=1)
    assert notified.payload == f"origin {','.join(sorted(ids))}"


def test_a_server_error_is_its_class(url: str) -> None:
    with psycopg.Connection.connect(url, autocommit=True) as conn:
        with pytest.raises(errors.SyntaxError):
            _command(conn, "BEGINN")
        _command(conn, "BEGIN")
        with pytest.raises(errors.UndefinedTable):
            _command(conn, "LOCK TABLE no_such_table")
        failed = conn.info.transaction_status
        _command(conn, "ROLLBACK")
        statuses = (failed, conn.info.transaction_status)
        assert statuses == (TransactionStatus.INERROR, TransactionStatus.IDLE)


def test_a_lost_connection_is_an_operational_error_without_sqlstate(url: str) -> None:
    # As psycopg's execute raises it: the store retries the transaction or answers
    # Unavailable (postgres._Lost, postgres._outage).
    with (
        psycopg.Connection.connect(url, autocommit=True) as conn,
        psycopg.Connection.connect(url, autocommit=True) as other,
    ):
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError) as raised:
            _command(conn, "BEGIN")
        assert (raised.value.sqlstate, conn.broken) == (None, True)
