"""The vocabulary in helmr.states is the one every layer uses: the store's SQL,
the custom resources' limits, and the bounded ErrorInfo."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from helmr import states
from helmr.protocol import FailRequest
from helmr.resources import TurnError
from helmr.states import ERROR_CODE_MAX, ERROR_MESSAGE_MAX, ErrorInfo
from helmr.store import Store


async def _table_sql(path: Path) -> dict[str, str]:
    store = await Store.open(path)
    await store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    return dict(rows)


def _check_values(sql: str, column: str) -> tuple[str, ...]:
    found = re.search(rf"CHECK \({column} IN\s*\(([^)]*)\)\)", sql)
    assert found is not None, f"no CHECK on {column}"
    return tuple(value.strip().strip("'") for value in found.group(1).split(","))


@pytest.mark.parametrize(
    ("table", "column", "vocabulary"),
    [
        ("sessions", "status", states.SessionStatus),
        ("sessions", "close_how", states.CloseHow),
        ("holds", "scope", states.HoldScope),
        ("turns", "status", states.TurnStatus),
        ("turns", "settling", states.Outcome),
        ("messages", "status", states.MessageStatus),
        ("storage", "state", states.EpisodeState),
        ("saves", "status", states.SaveStatus),
    ],
)
async def test_sql_check_constraints_are_the_vocabulary(
    tmp_path: Path, table: str, column: str, vocabulary: object
) -> None:
    sql = (await _table_sql(tmp_path / "store.db"))[table]
    assert _check_values(sql, column) == states.values(vocabulary)


def test_the_reasons_that_name_one_thing_spell_it_alike() -> None:
    stops = {reason.value for reason in states.StopReason}
    interrupts = {reason.value for reason in states.InterruptReason}
    assert set(states.values(states.CloseHow)) <= stops  # a close stops its process
    assert stops & interrupts == {
        "cancel",
        "session_failed",
        "turn_deadline_elapsed",
        "stop_deadline_elapsed",
        "storage_exhausted",
    }


def test_terminal_and_outcome_sets_are_within_their_vocabularies() -> None:
    assert states.TERMINAL_TURN_STATUSES.issubset(states.values(states.TurnStatus))
    assert states.ENDED_SESSION_STATUSES.issubset(states.values(states.SessionStatus))
    assert {o.value for o in states.MessageOutcome}.issubset(states.values(states.MessageStatus))
    assert states.TERMINAL_TURN_STATUSES.issuperset(states.values(states.Outcome))


def test_error_info_limits_are_the_turn_crds() -> None:
    schema = TurnError.model_json_schema()["properties"]  # what the CRD is generated from
    assert schema["code"]["maxLength"] == ERROR_CODE_MAX
    assert schema["message"]["maxLength"] == ERROR_MESSAGE_MAX


def test_a_long_failure_is_cut_to_the_limit_with_a_marker() -> None:
    error = ErrorInfo(code="c" * 200, message="x" * 40_000)
    assert len(error.message) <= ERROR_MESSAGE_MAX
    assert error.message.startswith("x" * 32_000)
    cut = 40_000 - error.message.count("x")
    assert error.message.endswith(f"… [{cut} more characters]")
    assert len(error.code) <= ERROR_CODE_MAX
    TurnError(code=error.code, message=error.message)  # fits the CRD's schema


def test_a_failure_within_the_limit_is_kept_as_it_is() -> None:
    message = "y" * ERROR_MESSAGE_MAX
    assert ErrorInfo(code="boom", message=message).message == message


def test_error_info_ignores_fields_it_does_not_know() -> None:
    # A client parsing a newer server's Turn (or a server an older runner's
    # failure) keeps working; the fail request itself still forbids strays.
    error = TypeAdapter(ErrorInfo).validate_python(
        {"code": "boom", "message": "m", "detail": {"x": 1}}
    )
    assert error == ErrorInfo(code="boom", message="m")
    assert ErrorInfo.from_json({"code": "boom", "message": "m", "detail": 1}) == error
    body = {"error": {"code": "boom", "message": "x" * 40_000}}
    request = TypeAdapter(FailRequest).validate_python(body)
    assert len(request.error.message) <= ERROR_MESSAGE_MAX
