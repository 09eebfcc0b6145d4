"""kopf's log of handlers, less the success line of each watch event.

kopf logs ``Handler '…' succeeded.`` at INFO after every handler it runs. The
watch-event handlers (``kopf.on.event``: ``session_deleted``, so Sessions need no
finalizer, and ``runner_pod_event``) run for every event of every Session and
runner pod: at 1,000 Sessions on kwok their success lines were half of the
control plane's log (20,100 of 40,900 lines), each formatted and written on the
event loop. Their failures, and every other line of kopf's, are kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

KOPF_OBJECTS = logging.getLogger("kopf.objects")
"""The logger kopf's per-object lines go to (its handlers' outcomes among them)."""


class WatchSuccesses(logging.Filter):
    """Drops kopf's success line of the given handlers (kopf names a handler of a
    function by its qualified name)."""

    def __init__(self, *handlers: Callable[..., Any]) -> None:
        super().__init__()
        self._lines = frozenset(f"Handler {fn.__qualname__!r} succeeded." for fn in handlers)

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg in self._lines)
