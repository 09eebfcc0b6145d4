"""kopf's logging, adjusted: its log of handlers less the success lines it writes
for every object, and the event loop's reports, which it drops, kept.

kopf logs ``Handler '…' succeeded.`` at INFO after every handler it runs, and a
summary of each cause it processed. The watch-event handlers (``kopf.on.event``:
``session_deleted``, so Sessions need no finalizer, and ``runner_pod_event``) run
for every event of every Session and runner pod: their success lines were about
half of the control plane's log. After a restart kopf resumes every Session, Turn
and Actor, two lines each, each formatted and written on the event loop while it
is busiest (docs/sizing.md has the profile). Dropped: every
handler's success line, and the summary of a resume that failed nothing. Kept:
every failure, retry and other line of kopf's, and the summary of a creation or
an update (``Creation is processed: 1 succeeded; 0 failed.``), so each applied
object's outcome is still logged once.

kopf's own logging setup (``kopf run`` without ``--debug``) gives the ``asyncio``
logger a null handler and stops it propagating, to keep the loop's debug chatter
out. That logger is also where the loop's exception handler reports what no code
caught: a task's exception never retrieved, an exception raised in a protocol's
callback (``connection_made`` of the runner port's server, on uvloop as on
asyncio). Those are bugs, and they were lost: :func:`hear_the_loop` keeps the
logger's warnings and errors.
"""

from __future__ import annotations

import logging
import re

KOPF_OBJECTS = logging.getLogger("kopf.objects")
"""The logger kopf's per-object lines go to (its handlers' outcomes among them)."""
LOOP = logging.getLogger("asyncio")
"""The logger the event loop's exception handler writes to (asyncio's and uvloop's)."""

_ROUTINE = re.compile(
    r"Handler '[^']+' succeeded\.|Resuming is processed: \d+ succeeded; 0 failed\."
)
"""kopf's lines, as it writes them (``kopf._core.actions.execution``,
``kopf._core.reactor.processing``)."""


class RoutineSuccesses(logging.Filter):
    """Drops kopf's success line of each handler and its summary of a clean resume."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and _ROUTINE.fullmatch(record.msg))


def hear_the_loop() -> None:
    """Undoes kopf's silencing of the event loop's logger, at WARNING and above:
    through the root logger's handlers, in the process's log format."""
    LOOP.handlers.clear()
    LOOP.propagate = True
    LOOP.setLevel(logging.WARNING)
