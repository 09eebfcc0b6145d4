"""Log lines for collectors (one JSON object a line) or for people (text), each
carrying the Session it is about.

Where a Session, Turn or process is being worked on, the code binds it once
(:func:`bound`); every line logged inside, by any logger (kopf's and aiohttp's
too), carries ``namespace``, ``session``, ``turn`` and ``epoch`` as far as they
are known, so call sites never pass them by hand. The binding is a context
variable: it follows the asyncio task (and the tasks it creates), not the thread.

Standard library only: the runner imports this, and its image has nothing else.
The JSON is a few lines of ``json.dumps``, so python-json-logger (which kopf
happens to pull in for its own formatter) would add a dependency for nothing.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal, TypeAlias, get_args

LogFormat: TypeAlias = Literal["json", "text"]
LOG_FORMATS: tuple[LogFormat, ...] = get_args(LogFormat)

ENV_LOG_FORMAT = "HELMR_LOG_FORMAT"
"""The environment variable both the control plane and the runner read: json or text."""

CONTEXT_FIELDS = ("namespace", "session", "turn", "epoch")
"""What a line says it is about, in this order, when known."""

Context: TypeAlias = dict[str, str | int]

_context: ContextVar[Context] = ContextVar("helmr_log_context", default={})  # noqa: B039 (never mutated)


def log_format(value: str | None, default: LogFormat = "text") -> LogFormat:
    """``value`` (e.g. the environment's) as a log format; ``default`` when unset."""
    if not value:
        return default
    for known in LOG_FORMATS:
        if value.strip().lower() == known:
            return known
    raise ValueError(f"{ENV_LOG_FORMAT}={value!r}: use one of {', '.join(LOG_FORMATS)}")


def bind(**fields: str | int | None) -> None:
    """Adds ``fields`` (of :data:`CONTEXT_FIELDS`; None removes one) to the current
    context, for the rest of the current task: for a whole process or task."""
    _context.set(_merged(_checked(fields)))


def bind_about(session: str | None, turn: str | None, epoch: int | None) -> None:
    """:func:`bind` of a Session, a Turn and a process epoch (None removes one), for a
    caller that binds them for every request it serves: no names to check, no keywords."""
    _context.set(_merged((("session", session), ("turn", turn), ("epoch", epoch))))


@contextmanager
def bound(**fields: str | int | None) -> Iterator[None]:
    """Adds ``fields`` to the log context for the ``with`` block only."""
    token = _context.set(_merged(_checked(fields)))
    try:
        yield
    finally:
        _context.reset(token)


def current() -> Context:
    """The fields bound where the caller runs."""
    return dict(_context.get())


_FIELDS = frozenset(CONTEXT_FIELDS)


def _checked(fields: dict[str, str | int | None]) -> Iterable[tuple[str, str | int | None]]:
    if not _FIELDS.issuperset(fields):
        unknown = set(fields) - _FIELDS
        raise TypeError(f"not log context fields: {', '.join(sorted(unknown))}")
    return fields.items()


def _merged(fields: Iterable[tuple[str, str | int | None]]) -> Context:
    merged = _context.get().copy()
    for name, value in fields:
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def _kopf_namespace(record: logging.LogRecord) -> object:
    # kopf's per-object loggers name the object they handle in ``k8s_ref``.
    ref = getattr(record, "k8s_ref", None)
    return ref.get("namespace") if isinstance(ref, dict) else None


def _about(record: logging.LogRecord) -> Context:
    about = current()
    if "namespace" not in about and isinstance(namespace := _kopf_namespace(record), str):
        about["namespace"] = namespace
    return {name: about[name] for name in CONTEXT_FIELDS if name in about}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the context, and the
    exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_about(record),
        }
        ref = getattr(record, "k8s_ref", None)
        if isinstance(ref, dict) and ref.get("name"):
            line["object"] = f"{ref.get('kind')}/{ref['name']}"
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [session=... turn=...]``, for people."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        about = " ".join(f"{name}={value}" for name, value in _about(record).items())
        line = super().formatMessage(record)
        return f"{line} [{about}]" if about else line


def formatter(fmt: LogFormat) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else TextFormatter()


def configure(fmt: LogFormat, level: int | None = None) -> None:
    """Every line of the process in ``fmt``: the root logger's handlers (kopf's, when
    ``kopf run`` installed one) get the format; without any, one to stderr is added.
    ``level`` sets the root level (kopf's ``--verbose``/``--quiet`` set it otherwise)."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    for handler in root.handlers:
        handler.setFormatter(formatter(fmt))
    if level is not None:
        root.setLevel(level)
