"""helmr.logs: one JSON object a line (or text), each about what is bound where it is logged."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import pytest

from helmr import logs


def record(message: str = "hello %s", *args: object, **extra: object) -> logging.LogRecord:
    exc_info = sys.exc_info() if extra.pop("exc", False) else None
    made = logging.LogRecord("helmr.test", logging.WARNING, __file__, 1, message, args, exc_info)
    for name, value in extra.items():
        setattr(made, name, value)
    return made


def as_json(made: logging.LogRecord) -> dict[str, object]:
    line = logs.JsonFormatter().format(made)
    assert "\n" not in line
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_a_json_line_has_time_level_logger_and_message_and_nothing_unknown() -> None:
    line = as_json(record("hello %s", "world"))

    assert line.keys() == {"time", "level", "logger", "message"}
    assert (line["level"], line["logger"]) == ("warning", "helmr.test")
    assert line["message"] == "hello world"
    assert str(line["time"]).endswith("+00:00")


def test_a_json_line_carries_what_is_bound_where_it_is_logged() -> None:
    with logs.bound(namespace="team", session="ses_1", epoch=3):
        with logs.bound(turn="turn_1"):
            inner = as_json(record())
        outer = as_json(record())
    after = as_json(record())

    assert {k: inner.get(k) for k in logs.CONTEXT_FIELDS} == {
        "namespace": "team",
        "session": "ses_1",
        "turn": "turn_1",
        "epoch": 3,
    }
    assert "turn" not in outer
    assert outer["session"] == "ses_1"
    assert "session" not in after


def test_none_unbinds_a_field_and_unknown_fields_are_refused() -> None:
    with logs.bound(session="ses_1", turn="turn_1"), logs.bound(turn=None):
        assert logs.current() == {"session": "ses_1"}
    with pytest.raises(TypeError, match="actor"):
        logs.bind(actor="a")


async def test_a_binding_follows_its_task_and_not_its_siblings() -> None:
    async def work(turn: str) -> dict[str, object]:
        logs.bind(turn=turn)
        await asyncio.sleep(0)
        return as_json(record())

    first, second = await asyncio.gather(work("turn_1"), work("turn_2"))

    assert (first["turn"], second["turn"]) == ("turn_1", "turn_2")
    assert "turn" not in logs.current()


def test_kopfs_object_lines_name_their_namespace_and_object() -> None:
    ref = {"kind": "Session", "name": "review", "namespace": "team"}

    line = as_json(record(k8s_ref=ref))

    assert (line["namespace"], line["object"]) == ("team", "Session/review")


def test_an_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        line = as_json(record(exc=True))

    assert "RuntimeError: boom" in str(line["exception"])


def test_a_text_line_ends_with_what_is_bound() -> None:
    with logs.bound(session="ses_1", epoch=2):
        line = logs.TextFormatter().format(record("hello %s", "world"))

    assert line.endswith("WARNING helmr.test: hello world [session=ses_1 epoch=2]")


def test_log_format_reads_the_setting() -> None:
    assert logs.log_format(None) == "text"
    assert logs.log_format("", default="json") == "json"
    assert logs.log_format(" JSON ") == "json"
    with pytest.raises(ValueError, match="HELMR_LOG_FORMAT='yaml'"):
        logs.log_format("yaml")


def test_configure_formats_every_root_handler_kopfs_included() -> None:
    root = logging.getLogger()
    kept = root.handlers[:], root.level
    kopfs = logging.StreamHandler()
    root.handlers[:] = [kopfs]
    try:
        logs.configure("json", logging.DEBUG)
        assert isinstance(kopfs.formatter, logs.JsonFormatter)
        assert root.level == logging.DEBUG
        root.handlers[:] = []
        logs.configure("text")
        assert [type(h.formatter) for h in root.handlers] == [logs.TextFormatter]
    finally:
        root.handlers[:], level = kept
        root.setLevel(level)
